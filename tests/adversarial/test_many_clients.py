"""Issue 19, "memory that grows with the work, not with its worst case": a run of thousands of clients records
per-client values sparsely, and the CLI's path (run, result, summary, per-step records) never builds a
[steps, clients] column from them."""

from __future__ import annotations

import json
import tracemalloc

import sim.__main__ as cli_module
from sim.__main__ import main as cli
from sim.trace import CLIENT_COLUMNS, SparseClients

NUM_CLIENTS = 5_000


def test_the_cli_path_never_makes_a_steps_by_clients_column(tmp_path, monkeypatch):
    # 5,000 clients, one request each (arriving ten a step, 20-token prompts and answers): ~520 steps, so one dense
    # column would be 520 x 5,000 x 8 bytes (~21 MB), the six of them ~125 MB
    requests = [{"id": f"r{i}", "arrival_step": i // 10, "prompt_len": 20, "output_len": 20, "client": f"c{i}"}
                for i in range(NUM_CLIENTS)]
    path, out = tmp_path / "clients.json", tmp_path / "result.json"
    path.write_text(json.dumps({"name": "many clients", "config": {"num_blocks": 20_000}, "requests": requests}))
    made: list[str] = []

    def densify(self, name):
        made.append(name)
        raise AssertionError(f"the CLI made the column {name!r} of a sparse trace")

    monkeypatch.setattr(SparseClients, "_densify", densify)
    # The peak is counted from the scenario loaded on: the loader reads a file with one read of up to its 256 MB
    # limit, whose buffer (allocated, then cut to the file's size) would be the peak of any run.
    load = cli_module.load_scenario

    def load_then_reset_the_peak(file: str):
        loaded = load(file)
        tracemalloc.reset_peak()
        return loaded

    monkeypatch.setattr(cli_module, "load_scenario", load_then_reset_the_peak)
    tracemalloc.start()
    try:
        code = cli(["run", str(path), "--out", str(out), "--steps"])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert code == 0 and not made
    result = json.loads(out.read_text())
    num_steps = result["summary"]["num_steps"]
    assert len(result["requests"]) == NUM_CLIENTS and len(result["steps"]) == num_steps > 400
    dense = num_steps * NUM_CLIENTS * 8 * len(CLIENT_COLUMNS)
    # ~36 MB, the result's records and text included (a dense record of the same run peaks at ~380 MB)
    assert peak < dense / 2, (peak, dense)
