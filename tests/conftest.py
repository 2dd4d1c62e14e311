"""Suite-wide pytest set-up: where the repo and the shared scenario files live.

`shared/` sits beside the repo (`../shared`) on a developer's machine and in CI's fresh clone alike; the vLLM
worked examples (`scenarios/vllm/*.json` with `*.expected.json` beside each) come from there.
"""

from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = REPO_ROOT.parent / "shared"
VLLM_SCENARIOS_DIR = SHARED_DIR / "scenarios" / "vllm"


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def vllm_scenarios_dir() -> Path:
    """The vLLM worked examples; a missing folder is a broken checkout, so fail rather than skip."""
    if not VLLM_SCENARIOS_DIR.is_dir():
        pytest.fail(f"vLLM example scenarios not found at {VLLM_SCENARIOS_DIR} (../shared beside the repo)")
    return VLLM_SCENARIOS_DIR
