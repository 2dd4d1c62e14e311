"""Markup-free by construction (issue 40, item 1): text from a link, a file, a table cell or a name never reaches
Markdown or HTML by string interpolation. Streamlit draws as Markdown every message (markdown, caption, info,
warning, error, success, toast), every title and header, every metric, expander, button and widget label, every
``help`` and progress text; a value put into one of those by an f-string, ``+``, ``%`` or ``.format`` is markup.

The rule, checked on the source of ui/, pages/ and app.py:
1. Each piece interpolated into such an argument is *vouched for*: a call of one of the escapes or number formatters
   (``SAFE_CALLS``: ``plain`` and ``as_code`` in ui/wording.py are the one escape of such text), a value with a
   number format (``{n:,}``), a constant (an ALL_CAPS name), or an expression listed in ``COURSE_TEXT`` with where
   its words come from (the course's registry, a guided step's own text, a knob's choice).
2. No such argument, interpolated or passed as it is, names a value known to come from outside (``OUTSIDE``: the
   URL's query parameters, a run's label, a scenario's or a file's name or description, a request or client id, an
   exception's text, a link's raw value) unless through one of those calls.
3. No module reads a number with ``str.isdigit()`` / ``isdecimal()`` / ``isnumeric()`` (they accept '²' and '٣',
   which ``int()`` refuses or misreads): numbers from outside go through ``sim/untrusted.py``.

A new message that quotes a setting, a file or an id fails here, naming the file, the line and the piece: wrap the
piece in ``plain()`` (or ``as_code()``), or, for the course's own words, add it to ``COURSE_TEXT`` saying why.
(The pages' runtime check of the same promise is the link fuzzer, tests/app/test_link_fuzz.py.)
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import REPO_ROOT

SOURCES = sorted([*REPO_ROOT.glob("ui/**/*.py"), *REPO_ROOT.glob("pages/*.py"), REPO_ROOT / "app.py"])

# Streamlit calls that draw an argument as Markdown (or HTML: st.html), by method name: the arguments that are.
MESSAGES = ("markdown", "caption", "write", "info", "warning", "error", "success", "toast", "title", "header",
            "subheader", "html", "exception")
LABELLED = ("metric", "expander", "button", "download_button", "link_button", "page_link", "checkbox", "toggle",
            "radio", "selectbox", "multiselect", "slider", "select_slider", "number_input", "text_input", "text_area",
            "spinner", "tabs", "status", "popover", "segmented_control", "pills", "form_submit_button",
            "file_uploader", "color_picker", "date_input", "time_input", "data_editor", "progress", "chat_input")
MARKDOWN_KEYWORDS = ("body", "label", "help", "text", "placeholder")

# The escapes and the number formatters: what they return holds no Markdown from their argument.
SAFE_CALLS = {"plain", "as_code", "safe_id", "count", "fmt_fixed", "fmt_gib", "fmt_binary_size", "fmt_ms",
              "number_word", "a_number", "pct_change", "len", "int", "float", "round", "sum", "min", "max", "abs"}

# Expressions that are the course's own words, by (file, source): where each comes from.
COURSE_TEXT: dict[tuple[str, str], str] = {
    ("ui/page.py", "what.lower()"): "the caller's noun for the picker ('Policy', 'Server'), a constant",
    ("ui/page.py", "len(sentences) - shown"): "a count",
    ("ui/page.py", "_bullets(sentences[:shown])"): "the lessons' notices (ids in them through safe_id: "
                                                    "tests/adversarial/test_user_ids_in_charts.py)",
    ("ui/page.py", "label"): "the navigation's page names (page.navigation(), from lessons.LESSONS)",
    ("ui/page.py", "card.label"): "a headline card's label, made by a lesson (ids through safe_id)",
    ("ui/page.py", "card.caption"): "a headline card's caption, made by a lesson (ids through safe_id)",
    ("ui/lesson.py", "origin"): "'the uploaded scenario' or 'the preset'",
    ("ui/lesson.py", "listed"): "knob labels (course text; a client's name in one through safe_id) and plain() of "
                                "each value, joined above",
    ("ui/lesson.py", "said"): "' ' + plain(the file's description), or ''",
    ("ui/lesson.py", "join_and([label for label, _ in preset.variants])"): "a preset's variant labels "
                                                                             "(sim/presets.py)",
    ("ui/lesson.py", "what"): "the caller's noun ('policy', 'server', 'run')",
    ("ui/lesson.py", "title"): "a lesson page's title (the page's own constant)",
    ("ui/lesson.py", "question"): "a lesson's opening question (lessons/<id>/lesson.py QUESTION)",
    ("ui/lesson.py", "preset.description"): "a preset's description (sim/presets.py)",
    ("ui/lesson.py", "text"): "unservable_message sentences (sim.events.refusal, numbers only) or their list, "
                              "each run's label through plain()",
    ("ui/workbench.py", "listed"): "the cell problems, each message through plain(), joined above",
    ("ui/preemption_sections.py", "where"): "'your setting' or 'the grid cell nearest your setting'",
    ("ui/preemption_sections.py", "each"): "'the one re-admission' or 'each of the N re-admissions'",
    ("ui/preemption_sections.py", "config.max_num_seqs"): "an int (EngineConfig checks it)",
    ("ui/preemption_sections.py", "sweep.preemptions.size"): "an int",
    ("ui/preemption_sections.py", "costs.cost_caption(victim_cost, config, what)"): "numbers and a victim named "
                                                                                     "through safe_id",
    ("ui/guide.py", "n"): "the step number (an int)",
    ("ui/guide.py", "seed"): "a seed, read by sim.untrusted.whole_number",
    ("ui/guide.py", "lesson"): "a lesson id (lessons.BY_ID's key: the page's own)",
    ("ui/guide.py", "lessons.BY_ID[lesson].title"): "the course registry",
    ("ui/guide.py", "lessons.BY_ID[following].title"): "the course registry",
    ("ui/guide.py", "step.title"): "a guided step's title (lessons/<id>/guide.py)",
    ("ui/guide.py", "steps[n].title"): "a guided step's title (lessons/<id>/guide.py)",
    ("ui/guide.py", "stop"): "'' or '.'",
    ("ui/guide.py", "step.intro(values)"): "a guided step's text for the step's own knob values",
    ("ui/guide.py", "s.label"): "a guided step's setting label (lessons/<id>/guide.py)",
    ("ui/guide.py", "problem.question"): "a seeded problem's question (lessons/*/problems.py, numbers only)",
    ("ui/guide.py", "problem.unit"): "a seeded problem's unit ('steps', 'tokens', 'MB')",
    ("ui/guide.py", "problem.answer_text"): "a seeded problem's answer (a number or a choice it wrote)",
    ("ui/guide.py", "problem.reasoning"): "a seeded problem's reasoning (lessons/*/problems.py)",
    ("ui/guide.py", "engine_line(problem.scenario.config)"): "a seeded problem's engine (lessons/problems.py)",
    ("ui/guide.py", "requests_table(problem.scenario.requests)"): "a seeded problem's requests (its own ids)",
    ("ui/guide.py", "player_caption(step)"): "the chart names of GuideChart.what",
    ("ui/guide.py", "state['feedback']"): "Problem.check's sentence about the answer (numbers it parsed)",
    ("ui/controls.py", "titles[keys[0]]"): "a preset's title (sim/presets.py)",
    ("ui/controls.py", "knob.label"): "a knob's label (course text; a client's name in one through safe_id)",
    ("ui/controls.py", "w"): "the panel's link warnings, each value through as_code()",
    ("ui/player.py", "warning"): "linked_step's warning, the link's value through as_code()",
    ("ui/sweeps.py", "num_ready"): "a count", ("ui/sweeps.py", "total"): "a count",
    ("ui/workbench_results.py", "unit"): "the time unit, a knob's choice ('steps' or 'ms')",
    ("ui/clients.py", "fairness_clients.describe_clients(workload)"): "client names through safe_id "
                                                                        "(lessons/fairness/clients.py)",
    ("ui/runner.py", "key"): "a status line's key (not drawn)",
    ("pages/9_Glossary.py", "term.name"): "a glossary term (ui/glossary.py)",
    ("pages/9_Glossary.py", "term.vllm"): "a glossary term's vLLM name (ui/glossary.py)",
    ("pages/9_Glossary.py", "term.text"): "a glossary term's text (ui/glossary.py)",
    ("pages/5_Token_budget.py", "', '.join((f'{b:,}' for b in points['unchunked_budgets'])) or 'none'"): "numbers",
    ("app.py", "icon"): "lessons.LESSONS", ("app.py", "name"): "lessons.LESSONS",
    ("app.py", "question"): "lessons.LESSONS", ("app.py", "takeaway"): "lessons.LESSONS",
}

# Values from outside, wherever they appear in a Markdown argument (outside a SAFE_CALLS call).
OUTSIDE = re.compile(r"query_params|\brun\.label\b|\blabels\b|\.name\b|\.description\b|\brequest_id\b|\bclient_id\b"
                     r"|^e$|\bstr\(e\)|\braw\b|\bwanted\b|\blinked\b|\bgiven\b|\bfile\b|\.weights\b")


def _calls(tree: ast.AST) -> Iterator[tuple[ast.Call, str]]:
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and (node.func.attr in MESSAGES or node.func.attr in LABELLED)):
            yield node, node.func.attr


def _markdown_args(call: ast.Call) -> list[ast.expr]:
    args = list(call.args[:1]) if call.func.attr != "progress" else list(call.args[1:2])
    return args + [k.value for k in call.keywords if k.arg in MARKDOWN_KEYWORDS]


def _func_name(call: ast.Call) -> str:
    return call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")


def _is_constant_name(node: ast.expr) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    return bool(name) and name.lstrip("_").isupper()


def _pieces(node: ast.expr) -> Iterator[ast.expr]:
    """The interpolated pieces of a Markdown argument (an f-string's values, the sides of + and %, .format's
    arguments, both branches of a conditional)."""
    if isinstance(node, ast.JoinedStr):
        for value in node.values:
            # ({n:,} and {x:.1f} are numbers: a string would raise)
            if isinstance(value, ast.FormattedValue) and value.format_spec is None:
                yield from _pieces(value.value)
        return
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        yield from _pieces(node.left)
        yield from _pieces(node.right)
        return
    if isinstance(node, ast.IfExp):
        yield from _pieces(node.body)
        yield from _pieces(node.orelse)
        return
    if isinstance(node, ast.Call) and _func_name(node) == "format" and isinstance(node.func, ast.Attribute):
        yield from _pieces(node.func.value)
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            yield from _pieces(arg)
        return
    if isinstance(node, ast.Constant):
        return
    yield node


def _vouched(node: ast.expr, where: str) -> bool:
    if isinstance(node, ast.Call) and _func_name(node) in SAFE_CALLS:
        return True
    if _is_constant_name(node):
        return True
    return (where, ast.unparse(node)) in COURSE_TEXT


def _outside(node: ast.expr) -> list[str]:
    """The parts of ``node`` outside every SAFE_CALLS call that look like a value from outside."""
    found = []

    def visit(n: ast.AST) -> None:
        if isinstance(n, ast.Call) and _func_name(n) in SAFE_CALLS:
            return
        if isinstance(n, ast.Name | ast.Attribute | ast.Subscript) and OUTSIDE.search(ast.unparse(n)):
            found.append(ast.unparse(n))
            return
        for child in ast.iter_child_nodes(n):
            visit(child)

    visit(node)
    return found


def violations(path: Path) -> list[str]:
    where = path.relative_to(REPO_ROOT).as_posix()
    out = []
    for call, method in _calls(ast.parse(path.read_text())):
        for arg in _markdown_args(call):
            for piece in _pieces(arg):
                if _vouched(piece, where):
                    continue
                if piece is not arg:
                    out.append(f"{where}:{piece.lineno}: {ast.unparse(piece)!r} is interpolated into st.{method}()"
                               f" (Markdown): wrap it in plain() or as_code(), or list it in COURSE_TEXT")
                elif _outside(piece):
                    out.append(f"{where}:{piece.lineno}: {ast.unparse(piece)!r} goes into st.{method}() (Markdown) "
                               f"as it is, and {_outside(piece)[0]!r} is from outside: wrap it in plain()")
    return out


def test_no_text_from_outside_goes_into_markdown_by_interpolation():
    found = [v for path in SOURCES for v in violations(path)]
    assert not found, "\n".join(found)


def test_every_course_text_entry_is_still_in_the_code():
    # (an entry for code that has gone would vouch for whatever takes its place next)
    seen = {(p.relative_to(REPO_ROOT).as_posix(), ast.unparse(piece)) for p in SOURCES
            for call, _ in _calls(ast.parse(p.read_text())) for arg in _markdown_args(call) for piece in _pieces(arg)}
    stale = sorted(set(COURSE_TEXT) - seen)
    assert not stale, f"COURSE_TEXT entries no longer in the code: {stale}"


def test_the_rule_catches_the_issues_examples():
    # The shapes issue 40 found, as they were: each is reported.
    def found(source: str, where: str = "ui/x.py") -> bool:
        tree = ast.parse(source)
        return any(not _vouched(p, where) or _outside(p) for c, _ in _calls(tree) for a in _markdown_args(c)
                   for p in _pieces(a))

    assert found('st.markdown(f"### {title}: problem {raw[:20]}")')
    assert found('st.warning(f"The link\'s step `guide={raw[:20]}` was ignored")')
    assert found('col.metric(f"{run.label}: average finish", v)')
    assert found('st.caption(run.label)')
    assert found('st.error(f"**Invalid setting:** {e}")')
    assert found('st.warning("The link gives " + st.query_params["x"])')
    assert not found('st.caption(plain(run.label))') and not found('st.metric(f"{n:,} steps", v)')


def test_no_number_is_read_with_isdigit():
    paths = [*SOURCES, *REPO_ROOT.glob("sim/**/*.py"), *REPO_ROOT.glob("lessons/**/*.py")]
    found = [f"{p.relative_to(REPO_ROOT)}:{node.lineno}" for p in paths for node in ast.walk(ast.parse(p.read_text()))
             if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
             and node.func.attr in ("isdigit", "isdecimal", "isnumeric")]
    assert not found, f"numbers read with str.isdigit() (it accepts '²'): use sim.untrusted.whole_number: {found}"
