"""deploy/serve.sh in a real browser: two replicas behind nginx on loopback, a lesson opened through the proxy, a
slider moved and the chart redrawn, then the script stopped and nothing of it left running.

Without nginx (Debian's package) this skips on a developer's machine and fails in CI, as a missing Chromium does.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks.class_load import descendants  # (every process under serve.sh, from one read of /proc)
from tests.browser.conftest import _is_healthy
from tests.browser.helpers import assert_no_exception, open_app, wait_for_app, wait_for_chart_title
from tests.browser.serving import STOP_TIMEOUT_S, Served, is_running, serve

# The first chart's traces as plotly holds them (the graph div's .data): what the reader sees, as data.
_FIRST_CHART_DATA_JS = """() => {
  const plot = document.querySelector('[data-stale="false"] .js-plotly-plot');
  return plot && JSON.stringify(plot.data.map(t => [t.name, t.x, t.y, t.base]));
}"""


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    """deploy/serve.sh --replicas 2 on a free loopback port."""
    with serve(tmp_path, replicas=2) as running:
        yield running


def test_two_replicas_behind_nginx(served, page):
    base_url, process, log_path = served.base_url, served.process, served.log_path
    replica_ports, run_dir = served.replica_ports(), served.run_dir()
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
    left = sorted(pid for pid in processes if is_running(pid))
    assert not left, f"still running after serve.sh stopped: {left}"
    assert not _is_healthy(base_url)
    assert not run_dir.exists()
