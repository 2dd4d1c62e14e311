"""Suite-wide pytest set-up: where the repo and its reference scenario files live.

The repository is self-contained: the vLLM worked examples (`tests/fixtures/vllm/*.json` with `*.expected.json`
beside each, provenance in the README there) and the benchmark workloads (`benchmarks/scenarios/`) are copies kept
in the repo, so a clone in any folder passes the suite.
"""

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
VLLM_SCENARIOS_DIR = REPO_ROOT / "tests" / "fixtures" / "vllm"
BENCH_SCENARIOS_DIR = REPO_ROOT / "benchmarks" / "scenarios"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def vllm_scenarios_dir() -> Path:
    """The vLLM worked examples; a missing folder is a broken checkout, so fail rather than skip."""
    if not VLLM_SCENARIOS_DIR.is_dir():
        pytest.fail(f"vLLM example scenarios not found at {VLLM_SCENARIOS_DIR} (a broken checkout)")
    return VLLM_SCENARIOS_DIR


APP_TESTS_DIR = REPO_ROOT / "tests" / "app"


@pytest.fixture
def no_prefetch_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    """ui.runner makes every run in the test's own thread: no worker processes started for a test (ui.background)."""
    from ui import runner

    class _NoWorkers:
        @staticmethod
        def take(key: str, patience_s: float = 0.0) -> None:
            return None

    monkeypatch.setattr(runner, "_prefetcher", _NoWorkers)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests under tests/app/ (whole pages run by Streamlit's AppTest, the slow half of the suite) get the ``app``
    marker, so ``pytest -m "not browser and not app"`` is the fast loop. (tests/browser/conftest.py marks its own.)"""
    for item in items:
        if APP_TESTS_DIR in item.path.parents:
            item.add_marker(pytest.mark.app)
