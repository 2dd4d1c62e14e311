"""README's "Limits" section states the limits sim/cost_estimate.py enforces: the table, the step guard's figure,
the cached traces' budget and the file size are read from the code here, so a change to one shows in the other."""

from __future__ import annotations

import re

from sim import scenario
from sim.cost_estimate import CLI_LIMITS, DENSE_CLIENTS_MAX, PAGE_LIMITS, max_recorded_steps
from tests.conftest import REPO_ROOT
from ui import runner


def _limits_section() -> str:
    text = (REPO_ROOT / "README.md").read_text()
    return text[text.index("### Limits"):text.index("\n## ", text.index("### Limits"))]


def _size(n: int) -> str:
    return f"{n // 2**30} GiB" if n % 2**30 == 0 else f"{n // 2**20} MiB"


def test_the_readmes_table_is_the_limits_in_the_code():
    rows = {cells[0]: cells[1:] for line in _limits_section().splitlines() if line.startswith("| ")
            for cells in [[c.strip() for c in line.strip("|").split("|")]]}
    expected = {
        "requests": (CLI_LIMITS.max_requests, PAGE_LIMITS.max_requests),
        "distinct clients": (CLI_LIMITS.max_clients, PAGE_LIMITS.max_clients),
        "tokens (prompts plus answers)": (CLI_LIMITS.max_tokens, PAGE_LIMITS.max_tokens),
        "arrivals, and estimated engine steps": (CLI_LIMITS.max_steps, PAGE_LIMITS.max_steps),
        "block-table cells (a table a batch slot, as long as its longest request: the blocks of the "
        "min(max_num_seqs, requests) longest requests)":
            (CLI_LIMITS.max_block_table_cells, PAGE_LIMITS.max_block_table_cells),
    }
    for name, (cli, page) in expected.items():
        assert rows[name][0].split()[0] == f"{cli:,}", name
        assert rows[name][1].split()[0] == f"{page:,}", name
    memory = rows["estimated peak memory of a run"]
    assert memory == [_size(CLI_LIMITS.max_bytes), _size(PAGE_LIMITS.max_bytes)]


def test_the_readmes_other_figures_are_the_codes():
    section = " ".join(_limits_section().split())  # (README wraps its lines)
    steps = max_recorded_steps(1, CLI_LIMITS)  # 2**30 // 1,300 bytes a step
    assert f"~{round(steps, -3):,} steps with one client in the CLI" in section
    assert f"dropped oldest first past {_size(runner.CACHE_MAX_BYTES)}" in section
    assert f"A run of up to {DENSE_CLIENTS_MAX} clients records every client's values every step" in section
    assert re.search(rf"a\s+file\s+over\s+{scenario.MAX_FILE_BYTES // 2**20} MB", (REPO_ROOT / "README.md").read_text())
