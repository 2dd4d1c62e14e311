"""deploy/serve.sh in a real browser: two replicas behind nginx on loopback, a lesson opened through the proxy, a
slider moved and the chart redrawn, then the script stopped and nothing of it left running.

Without nginx (Debian's package) this skips on a developer's machine and fails in CI, as a missing Chromium does.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.class_load import descendants  # (every process under serve.sh, from one read of /proc)
from tests.browser.conftest import REPO_ROOT, _free_loopback_port, _is_healthy, _log_tail, _unavailable
from tests.browser.helpers import assert_no_exception, open_app, wait_for_app, wait_for_chart_title

NGINX = os.environ.get("NGINX", "/usr/sbin/nginx")
SERVE = REPO_ROOT / "deploy" / "serve.sh"
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 30

# The first chart's traces as plotly holds them (the graph div's .data): what the reader sees, as data.
_FIRST_CHART_DATA_JS = """() => {
  const plot = document.querySelector('[data-stale="false"] .js-plotly-plot');
  return plot && JSON.stringify(plot.data.map(t => [t.name, t.x, t.y, t.base]));
}"""


def _is_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen, Path]]:
    """deploy/serve.sh --replicas 2 on a free loopback port: (base URL, the script's process, its output file)."""
    if not os.access(NGINX, os.X_OK):
        _unavailable(f"nginx not found at {NGINX}: install Debian's with "
                     "`apt-get install -y --no-install-recommends nginx` or set NGINX")
    port = _free_loopback_port()
    base_url = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(["bash", str(SERVE), "--replicas", "2", "--port", str(port),
                                    "--listen", "127.0.0.1"], cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHON": sys.executable})
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "Ctrl-C stops everything" not in log_path.read_text() or not _is_healthy(base_url):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"deploy/serve.sh did not serve {base_url} (exit code {process.poll()}):\n"
                            f"{_log_tail(log_path)}", pytrace=False)
            time.sleep(0.5)
        yield base_url, process, log_path
    finally:
        if process.poll() is None:  # (the test stops it itself; this is for a test that failed before)
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=STOP_TIMEOUT_S)


def test_two_replicas_behind_nginx(served, page):
    base_url, process, log_path = served
    started = log_path.read_text()
    replica_ports = re.search(r"replica\(s\) on 127\.0\.0\.1 ports ([\d ]+)\)", started).group(1).split()
    run_dir = Path(re.search(r"run directory (\S+);", started).group(1))
    assert len(replica_ports) == 2 and all(_is_healthy(f"http://127.0.0.1:{p}") for p in replica_ports)
    processes = descendants(process.pid)
    assert len(processes) >= 4  # two replicas, nginx's master and its worker (and the replicas' own workers)

    # Through the proxy: two slots give a mean finish of 433 steps, three of 400 (test_queueing_browser.py).
    open_app(page, f"{base_url}/Queueing?max_num_seqs=2")
    assert_no_exception(page)
    wait_for_chart_title(page, "FCFS")
    assert page.locator('[data-testid="stMetricValue"]').first.inner_text() == "433 steps"
    before = page.evaluate(_FIRST_CHART_DATA_JS)
    page.get_by_role("slider", name="max_num_seqs (batch slots)").focus()
    page.keyboard.press("ArrowRight")
    wait_for_app(page)
    wait_for_chart_title(page, "FCFS")
    assert_no_exception(page)
    assert page.locator('[data-testid="stMetricValue"]').first.inner_text() == "400 steps"
    after = page.evaluate(_FIRST_CHART_DATA_JS)
    assert before is not None and after is not None and after != before  # the chart was redrawn, with new bars
    # The sticky-session cookie nginx set, which keeps this browser on one replica.
    assert [c["name"] for c in page.context.cookies() if c["name"] == "schedlab_replica"] == ["schedlab_replica"]

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=STOP_TIMEOUT_S) == 0
    assert "stopping nginx and 2 replica(s)" in log_path.read_text()
    left = sorted(pid for pid in processes if _is_running(pid))
    assert not left, f"still running after serve.sh stopped: {left}"
    assert not _is_healthy(base_url)
    assert not run_dir.exists()
