"""docs/ARCHITECTURE.md stays true: every module under sim/ and ui/ has its line, and every path it names exists."""

import ast
import re

from tests.conftest import REPO_ROOT

DOC = REPO_ROOT / "docs" / "ARCHITECTURE.md"
PACKAGES = ("sim", "lessons", "ui")


def _modules() -> set[str]:
    return {p.relative_to(REPO_ROOT).as_posix() for pkg in PACKAGES for p in (REPO_ROOT / pkg).rglob("*.py")}


def _named_paths() -> set[str]:
    return set(re.findall(r"`((?:sim|lessons|ui|pages|scripts|benchmarks|tests)/[\w/.-]*|app\.py)`", DOC.read_text()))


def test_every_module_is_on_the_map():
    empty = {m for m in _modules() if not (REPO_ROOT / m).read_text().strip()}  # (a package's blank __init__.py)
    missing = sorted(_modules() - empty - _named_paths())
    assert not missing, f"modules with no line in docs/ARCHITECTURE.md: {missing}"


def test_every_path_on_the_map_exists():
    stale = sorted(p for p in _named_paths() if not (REPO_ROOT / p).exists())
    assert not stale, f"docs/ARCHITECTURE.md names paths that do not exist: {stale}"


MAX_PAGE_LINES = 110  # issue 17: "every page is a short script (about 100 lines at most)"; sections live in ui/


def test_every_page_is_a_short_script():
    long = {p.name: n for p in (REPO_ROOT / "pages").glob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_PAGE_LINES}
    assert not long, f"pages over {MAX_PAGE_LINES} lines (move their sections into ui/): {long}"


# ---- no import circle -------------------------------------------------------------------------------------------
def _module_name(path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(node: ast.If) -> bool:
    return isinstance(node.test, ast.Name | ast.Attribute) and ast.unparse(node.test).endswith("TYPE_CHECKING")


def _imports(path, name: str, modules: set[str]) -> set[str]:
    """The repository's modules that ``path`` imports, at its top or inside a function (a late import is still a
    circle, only hidden), but not under ``if TYPE_CHECKING:`` (never run)."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]) if node.level \
                else node.module or ""
            base = base.rstrip(".")
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return (found & modules) - {name}


def _import_graph() -> dict[str, set[str]]:
    paths = {_module_name(p): p for pkg in PACKAGES for p in (REPO_ROOT / pkg).rglob("*.py")}
    return {name: _imports(path, name, set(paths)) for name, path in paths.items()}


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return groups


def test_no_module_imports_itself_back_through_others():
    circles = _circles(_import_graph())
    assert not circles, f"import circles (a late import inside a function counts too): {circles}"


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _circles(graph) == [["a", "b", "c"]]
    assert "sim.engine" in _import_graph()["sim"]  # (the graph is read: sim/__init__.py imports the engine)


# ---- modules of one job -----------------------------------------------------------------------------------------
MAX_MODULE_LINES = 500
REASON = re.compile(r"^# Over 500 lines: \S", re.M)  # e.g. "# Over 500 lines: one table of every knob's rule."


def test_no_module_is_over_500_lines_without_a_reason_at_its_top():
    long = {p.relative_to(REPO_ROOT).as_posix(): n for pkg in PACKAGES
            for p in (REPO_ROOT / pkg).rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
            and not REASON.search("\n".join(p.read_text().splitlines()[:15]))}
    assert not long, (f"modules over {MAX_MODULE_LINES} lines: split them along their sections, or say why on one of "
                      f"their first 15 lines ('# Over 500 lines: <why>'): {long}")
