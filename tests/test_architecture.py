"""docs/ARCHITECTURE.md stays true: every module under sim/ and ui/ has its line, and every path it names exists."""

import re

from tests.conftest import REPO_ROOT

DOC = REPO_ROOT / "docs" / "ARCHITECTURE.md"


def _modules() -> set[str]:
    return {p.relative_to(REPO_ROOT).as_posix() for pkg in ("sim", "ui") for p in (REPO_ROOT / pkg).rglob("*.py")}


def _named_paths() -> set[str]:
    return set(re.findall(r"`((?:sim|ui|pages|scripts|benchmarks|tests)/[\w/.-]*|app\.py)`", DOC.read_text()))


def test_every_module_is_on_the_map():
    missing = sorted(_modules() - _named_paths())
    assert not missing, f"modules with no line in docs/ARCHITECTURE.md: {missing}"


def test_every_path_on_the_map_exists():
    stale = sorted(p for p in _named_paths() if not (REPO_ROOT / p).exists())
    assert not stale, f"docs/ARCHITECTURE.md names paths that do not exist: {stale}"


MAX_PAGE_LINES = 110  # issue 17: "every page is a short script (about 100 lines at most)"; sections live in ui/


def test_every_page_is_a_short_script():
    long = {p.name: n for p in (REPO_ROOT / "pages").glob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_PAGE_LINES}
    assert not long, f"pages over {MAX_PAGE_LINES} lines (move their sections into ui/): {long}"
