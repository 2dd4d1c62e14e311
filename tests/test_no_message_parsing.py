"""Nobody reads the simulator's words back (issue 32): an error or an event is data (``sim.config.FieldError``'s
fields, an ``Event``'s), and whoever words it for a reader builds the words from that data. So no code under
``ui/``, ``lessons/``, ``pages/``, ``app.py`` or ``sim/`` looks inside an error's message or an event's sentence: no
comparison or ``in`` test on it, no string method on it (``.startswith``, ``.replace``, ...), no regex over it, no
``.args``.

A static scan (the AST) for the words: inside an ``except ... as e`` block ``str(e)``, ``repr(e)``, an f-string of
``e``, ``e.args`` and a name assigned one of them, followed into a helper of the same module they are handed to;
anywhere, the sentence ``describe(...)`` returns (``trace.describe(...)`` too). Passing the words on whole (to
``st.error``, into a ``CellProblem``, into a new error's message) is fine: that shows them, it does not read them.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

SCANNED = [*(path for folder in ("ui", "lessons", "sim") for path in sorted((REPO_ROOT / folder).rglob("*.py"))),
           *sorted((REPO_ROOT / "pages").glob("*.py")), REPO_ROOT / "app.py"]


def _is_words_of(node: ast.AST, names: set[str], texts: frozenset[str] = frozenset()) -> bool:
    """``node`` is the words of an error bound to one of ``names`` (``str(e)``, ``repr(e)``, an f-string of it,
    ``e.args``), a name in ``texts`` that holds such words, or an event's (``describe(...)``). (The error object
    itself is not: ``e.at(...)``, ``e.name``.)"""
    if isinstance(node, ast.Name):
        return node.id in texts
    if isinstance(node, ast.Attribute):
        return node.attr == "args" and isinstance(node.value, ast.Name) and node.value.id in names
    if isinstance(node, ast.Subscript):  # e.args[0]
        return _is_words_of(node.value, names, texts)
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name == "describe":
            return True
        return name in ("str", "repr", "format") and any(
            (isinstance(a, ast.Name) and a.id in names) or _is_words_of(a, names, texts) for a in node.args)
    if isinstance(node, ast.JoinedStr):
        return any(isinstance(v, ast.FormattedValue) and (
            (isinstance(v.value, ast.Name) and v.value.id in names) or _is_words_of(v.value, names, texts))
            for v in node.values)
    return False


def _readings(tree: ast.AST, names: set[str], functions: dict[str, ast.FunctionDef],
              texts: frozenset[str] = frozenset()) -> list[ast.AST]:
    """The nodes of ``tree`` that read the words of an error in ``names``, of a name in ``texts`` or of an event;
    words handed to one of the module's ``functions`` are followed into it (once), as are names assigned them."""
    texts = texts | {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
                     and _is_words_of(node.value, names, texts) for t in node.targets if isinstance(t, ast.Name)}
    found: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):  # x in str(e), str(e) == "...", "..." in trace.describe(ev)
            if not all(isinstance(op, ast.Is | ast.IsNot) for op in node.ops) and any(
                    _is_words_of(part, names, texts) for part in (node.left, *node.comparators)):
                found.append(node)
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute) and _is_words_of(func.value, names, texts):
                found.append(node)  # str(e).startswith(...), .replace(...), .split(...)
            elif (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "re"
                  and any(_is_words_of(a, names, texts) for a in node.args)):
                found.append(node)  # re.search(..., str(e))
            elif isinstance(func, ast.Name) and func.id in functions:  # a helper of the module given the words
                called = functions[func.id]
                params = [a.arg for a in called.args.args]
                given = frozenset(params[i] for i, a in enumerate(node.args)
                                  if i < len(params) and _is_words_of(a, names, texts))
                if given and _readings(called, set(), {}, given):
                    found.append(node)
        elif isinstance(node, ast.Attribute) and _is_words_of(node, names, texts) and node.attr == "args":
            found.append(node)  # e.args
    return found


# Python's own words, not the simulator's: json.loads's ValueError for an integer literal past Python's digit limit
# ends in advice for a Python programmer ("; use sys.set_int_max_str_digits() ..."), which a file's author is spared.
ALLOWED = {("sim/scenario.py", 'f"not valid JSON here: {e}".split(";")')}


def message_readings(source: str, path: str = "") -> list[int]:
    """The lines of ``source`` that read an error's message or an event's sentence (but those ``ALLOWED``)."""
    tree = ast.parse(source)
    functions = {f.name: f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)}
    nodes = _readings(tree, set(), functions)  # (events: describe(...) anywhere)
    for handler in ast.walk(tree):
        if isinstance(handler, ast.ExceptHandler) and handler.name:
            nodes += _readings(handler, {handler.name}, functions)
    allowed = [text for where, text in ALLOWED if where == path]
    return sorted({n.lineno for n in nodes
                   if not any(text in (ast.get_source_segment(source, n) or "") for text in allowed)})


def test_no_code_reads_an_errors_message_or_an_events_sentence():
    found = {where: lines for path in SCANNED
             if (lines := message_readings(path.read_text(), where := path.relative_to(REPO_ROOT).as_posix()))}
    assert not found, f"reading the simulator's words back (use the error's or the event's fields): {found}"


def test_the_scan_finds_each_way_of_reading_words_back():
    for source in [
        "try:\n    f()\nexcept ValueError as e:\n    raise ValueError(f'workload.{e}' if not str(e).startswith('w') "
        "else str(e))",
        "try:\n    f()\nexcept ValueError as e:\n    ok = 'num_blocks' in str(e)",
        "try:\n    f()\nexcept ValueError as e:\n    m = str(e).replace('(stop_step)', 'Stops')",
        "try:\n    f()\nexcept ValueError as e:\n    m = e.args[0]",
        "import re\ntry:\n    f()\nexcept ValueError as e:\n    m = re.search('x', str(e))",
        "try:\n    f()\nexcept ValueError as e:\n    ok = f'{e}' == 'x'",
        "ok = trace.describe(event).startswith('rejected')",
        "ok = 'rejected' in describe(event, ids, config)",
        "try:\n    f()\nexcept ValueError as e:\n    text = str(e)\n    ok = text.startswith('workload')",
        # (ui/knobs.py before issue 32: the generator's message handed to a helper that rewrote it)
        "def words(message):\n    return message.replace('(stop_step)', 'Stops')\n\n"
        "try:\n    f()\nexcept ValueError as e:\n    raise ValueError(words(str(e))) from None",
    ]:
        assert message_readings(source), source
    for shown in [  # showing the words whole is fine
        "try:\n    f()\nexcept ValueError as e:\n    st.error(f'**Invalid setting:** {e}')",
        "try:\n    f()\nexcept ValueError as e:\n    problems.append(CellProblem(1, 'id', str(e)))",
        "try:\n    f()\nexcept FieldError as e:\n    ok = e.name in LABELS and e.lo is not None",
        "words = trace.describe(event)",
        "def show(message):\n    st.error(message)\n\ntry:\n    f()\nexcept ValueError as e:\n    show(str(e))",
    ]:
        assert not message_readings(shown), shown


def test_every_scanned_path_exists():
    assert all(Path(p).exists() for p in SCANNED) and len(SCANNED) > 50
