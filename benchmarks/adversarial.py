"""Peak RSS and wall time of each row of issue 19's table (hostile and oversized input), after the hardening.

    python benchmarks/adversarial.py            # every row (a minute or two)
    python benchmarks/adversarial.py prefix     # rows whose name contains "prefix"

Each row writes its scenario file to a temporary folder and runs it in a fresh process: the CLI's rows with
``python -m sim run FILE --out result.json``, the page's rows with the check a page makes (``sim.cost_estimate`` at
``PAGE_LIMITS``, as ui/sections.py and ui/runner.py call it); the rows marked "(page, AppTest)" open the page in
Streamlit's AppTest, put the file in its upload box and rerun the page three times (the figure is the slowest of
those reruns, after the upload's own run). Printed per row: the exit code (0 ran, 2 refused, 3
stopped), the wall time, the process's peak RSS and the first line of what it said on stderr.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent

_LONG_MODEL = {"name": "long context", "max_position_embeddings": 10_000_000}


def _requests(n: int, *, clients: bool = False, prompt: int = 20, output: int = 20, **extra) -> list[dict]:
    return [{"id": f"r{i}", "arrival_step": i // 10, "prompt_len": prompt, "output_len": output,
             **({"client": f"c{i}"} if clients else {}), **extra} for i in range(n)]


def _scenario(config: dict, requests: list[dict] | None = None, workload: dict | None = None) -> dict:
    body = {"requests": requests} if requests is not None else {"workload": workload}
    return {"name": "adversarial", "config": {"num_blocks": 20_000, **config}, **body}


def _a_client_a_request(n: int, **config) -> dict:
    return _scenario(config, _requests(n, clients=True))


def _rows() -> dict[str, tuple[str, Callable[[], dict | str]]]:
    """name -> (how it is run: "cli", "page", "slider" or "apptest:PAGE:LESSON", what makes the scenario or the
    file's text). Each is made when its row runs, and dropped before the measured process starts: a process forked
    from this one counts this one's memory in its peak RSS (it is the same process until it execs), so a parent
    holding every row's data made a 2,000-request run look ~180 MB."""
    many = [{"client_id": f"c{i}", "share": 1.0} for i in range(5_000)]
    return {
        # (past 100 clients a run records per-client values sparsely: these run, up to the CLI's 100,000 clients)
        "2,000 clients, one per request (CLI)": ("cli", lambda: _a_client_a_request(2_000)),
        "20,000 clients, one per request (CLI)": ("cli", lambda: _a_client_a_request(20_000)),
        "20,000 clients, one per request, VTC (CLI)": ("cli", lambda: _a_client_a_request(20_000, policy="vtc")),
        "100,000 clients, one per request (CLI's most)": ("cli", lambda: _a_client_a_request(100_000)),
        "100,001 clients, one per request (CLI, refused)": ("cli", lambda: _a_client_a_request(100_001)),
        "2,000 clients (page upload, Fairness)": ("page", lambda: _a_client_a_request(2_000)),
        "workload of 5,000 clients (CLI)": ("cli", lambda: _scenario({}, workload={"num_requests": 5_000,
                                                                                  "clients": many})),
        "workload of 20,000 clients (CLI)": ("cli", lambda: _scenario({}, workload={
            "num_requests": 20_000, "clients": [{"client_id": f"c{i}"} for i in range(20_000)]})),
        "max_num_seqs 4,096 x a 5 M-token request (CLI)": ("cli", lambda: _scenario(
            {"num_blocks": 1_000_000, "max_num_seqs": 4096, "max_num_batched_tokens": 1_000_000,
             "model": _LONG_MODEL},
            [*_requests(4_095), {"id": "long", "arrival_step": 0, "prompt_len": 5_000_000, "output_len": 10}])),
        "long-tailed generator lengths (CLI)": ("cli", lambda: _scenario(
            {"num_blocks": 1_250_000, "max_num_seqs": 4096, "max_num_batched_tokens": 100_000,
             "model": _LONG_MODEL},
            workload={"num_requests": 20_000, "prompt_sigma": 3.0, "prompt_max": 9_000_000, "output_sigma": 3.0,
                      "output_max": 900_000, "rate_per_step": 5.0})),
        "50,000 client weights (CLI)": ("cli", lambda: _scenario(
            {"client_weights": {f"c{i}": 1.0 + i % 3 for i in range(50_000)}}, _requests(200))),
        "1,000 requests sharing a 1 M-token prefix (CLI)": ("cli", lambda: _scenario(
            {"num_blocks": 1_000_000 // 16 + 4_000, "max_num_batched_tokens": 8192, "enable_prefix_caching": True,
             "model": _LONG_MODEL},
            _requests(1_000, prompt=1_000_010, output=5, prefix_group="system", prefix_len=1_000_000))),
        "a run allowed 10 M steps (CLI)": ("cli", lambda: _scenario(
            {"max_num_seqs": 1, "max_steps": 10_000_000}, _requests(10_000, output=1_000))),
        "20,000 small requests, answers x 20 by a slider (page)": ("slider", lambda: _scenario(
            {}, _requests(20_000, prompt=200, output=50))),
        "100 clients, the app's most (page, AppTest: Fairness)": ("apptest:2_Fairness:fairness", lambda: _scenario(
            {}, workload={"num_requests": 2_000, "clients": [{"client_id": f"c{i}"} for i in range(100)]})),
        "a 3.6 MB deeply nested file left in the box (page, AppTest)": ("apptest:1_Queueing:queueing",
                                                                      lambda: "[" * 1_800_000 + "]" * 1_800_000),
        "a 50 MB description and a 5 MB name (page, AppTest)": ("apptest:1_Queueing:queueing", lambda: {
            **_scenario({"num_blocks": 2_000}, _requests(40)), "name": "n" * 5_000_000,
            "description": "d" * 50_000_000}),
        "a 2 MB unknown key, refused (page, AppTest)": ("apptest:1_Queueing:queueing", lambda: {
            **_scenario({"num_blocks": 2_000, "k" * 2_000_000: 1}, _requests(40))}),
    }


_PAGE_CHECK = """
import sys
from sim import cost_estimate, scenario
sc = scenario.loads(open(sys.argv[1]).read(), cost_estimate.PAGE_LIMITS)
if sys.argv[2] == "slider":  # the answer-length slider pushed up: every answer 20 times longer
    import dataclasses
    sc = dataclasses.replace(sc, requests=tuple(dataclasses.replace(r, output_len=r.output_len * 20)
                                                for r in sc.requests))
    cost_estimate.check(cost_estimate.of_requests(sc.config, sc.requests), cost_estimate.PAGE_LIMITS)
print("within the page's limits")
"""


_APPTEST_RUN = """
import sys, time
from streamlit.testing.v1 import AppTest
page, lesson, path = sys.argv[1], sys.argv[2], sys.argv[3]
at = AppTest.from_file("app.py", default_timeout=600)
at.switch_page(f"pages/{page}.py")
at.query_params["mode"] = "free"
at.run()
start = time.perf_counter()
at.file_uploader(key=f"{lesson}.upload.0").set_value(("f.json", open(path, "rb").read(), "application/json")).run()
first = time.perf_counter() - start
reruns = []
for _ in range(3):
    start = time.perf_counter()
    at.run()
    reruns.append(time.perf_counter() - start)
shown = [e.value for e in [*at.exception, *at.error]]
print(f"upload run {first:.2f} s, slowest of 3 reruns {max(reruns):.2f} s; "
      + (f"the page says: {shown[0][:150]}" if shown else "the page runs it"), file=sys.stderr)
"""


def _measure(how: str, path: Path, out: Path) -> tuple[int, float, float, str]:
    """(exit code, wall s, peak RSS MB, first line of stderr) of one fresh process."""
    if how == "cli":
        cmd = [sys.executable, "-m", "sim", "run", str(path), "--out", str(out)]
    elif how.startswith("apptest:"):
        cmd = [sys.executable, "-c", _APPTEST_RUN, *how.split(":")[1:], str(path)]
    else:
        cmd = [sys.executable, "-c", _PAGE_CHECK, str(path), how]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    said = proc.stderr.read().strip().splitlines()
    proc.returncode = os.waitstatus_to_exitcode(status)
    line = next((x for x in reversed(said) if x.startswith(("error:", "sim.scenario.ScenarioError", "upload run"))),
                said[-1] if said else "")
    return proc.returncode, wall, usage.ru_maxrss / 1024, line


def main(argv: list[str]) -> int:
    wanted = argv[0].lower() if argv else ""
    print(f"{'row':<58} {'exit':>4} {'wall s':>7} {'RSS MB':>7}  what it said")
    with tempfile.TemporaryDirectory() as folder:
        for name, (how, make) in _rows().items():
            if wanted not in name.lower():
                continue
            path = Path(folder) / "scenario.json"
            data = make()
            path.write_text(data if isinstance(data, str) else json.dumps(data))
            del data
            gc.collect()
            code, wall, rss, said = _measure(how, path, Path(folder) / "result.json")
            print(f"{name:<58} {code:>4} {wall:>7.2f} {rss:>7.0f}  {said[:160]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
