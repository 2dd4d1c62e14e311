"""The benchmark scripts' own logic (their figures are printed, never asserted: see DEVELOPERS.md)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # (seconds each: CI runs them, the fast loop leaves them out)

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "page_rerun.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.parametrize("rounds", ["0", "x", ""])
def test_page_rerun_refuses_a_bad_round_count(rounds):
    done = _run("queueing", "--rounds", *([rounds] if rounds else []))
    assert done.returncode == 2
    assert f"--rounds: must be a whole number >= 1, got {rounds!r}" in done.stdout


def test_page_rerun_names_the_pages_it_knows():
    done = _run("queue")
    assert done.returncode == 2
    assert "unknown page 'queue': choose from queueing, fairness, cancellation, preemption, budget" in done.stdout


def test_page_rerun_reports_each_columns_fastest_round():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import page_rerun
    finally:
        sys.path.remove(str(SCRIPT.parent))
    # (first s, slider s, back s, settled s or None) per round: the slow round loses in every column.
    assert page_rerun._fastest([(1.0, 0.40, 0.15, None), (0.6, 0.25, 0.20, 0.5)]) == (0.6, 0.25, 0.15, 0.5)
    assert page_rerun._fastest([(1.0, 0.40, 0.15, None)]) == (1.0, 0.40, 0.15, None)


def test_sizing_sweep_refuses_a_repeat_below_one():
    done = subprocess.run([sys.executable, str(SCRIPT.parent / "sizing_sweep.py"), "--repeat", "0"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert "argument --repeat: must be a whole number >= 1, got '0'" in done.stderr


def test_cli_overhead_times_every_phase_of_a_run():
    # One round on a tiny scenario: every phase gets a row, and the verdict line is printed (its figures are not
    # asserted: the point is that the script keeps running the CLI's own calls).
    vllm_example = ROOT / "tests" / "fixtures" / "vllm" / "a_hol_fcfs.json"
    done = subprocess.run([sys.executable, str(SCRIPT.parent / "cli_overhead.py"), str(vllm_example), "--runs", "1",
                           "--steps"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = [line.split("  ")[0].strip() for line in done.stdout.splitlines()[2:-1]]
    assert rows == ["load + validate", "simulate", "records + summary", "JSON text", "write",
                    "overhead (all but simulate)", "interpreter start-up", "import sim.__main__ (with it)",
                    "python -m sim run (whole)"]
    assert done.stdout.splitlines()[-1].startswith("overhead / simulate: ")


def test_player_payload_refuses_a_bad_repeat_and_measures_one_lesson():
    script = ROOT / "benchmarks" / "player_payload.py"
    done = subprocess.run([sys.executable, str(script), "--repeat", "0"], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert done.returncode == 2 and "--repeat: must be at least 1, got 0" in done.stderr
    done = subprocess.run([sys.executable, str(script), "--repeat", "1", "--lesson", "preemption"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[1] for line in lines[1:]] == ["toy_pool", "recompute_vs_swap", "prefix_cache", "sizing"]
    assert all(line.rstrip().endswith("kB") for line in lines[1:])


def _benchmark(name: str):
    """The module of benchmarks/<name>.py (the folder is no package: it goes on the path while it is imported)."""
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(SCRIPT.parent))


def _class_load():
    return _benchmark("class_load")


@pytest.mark.parametrize(("args", "message"), [
    (["--students", "0"], "argument --students: must be a whole number from 1 to 200, got '0'"),
    (["--students", "201"], "argument --students: must be a whole number from 1 to 200, got '201'"),
    (["--students", "ten"], "argument --students: must be a whole number from 1 to 200, got 'ten'"),
    (["--minutes", "0"], "argument --minutes: must be a number of minutes above 0 and at most 60, got '0'"),
    (["--minutes", "nan"], "argument --minutes: must be a number of minutes above 0 and at most 60, got 'nan'"),
    (["--minutes", "61"], "argument --minutes: must be a number of minutes above 0 and at most 60, got '61'"),
    (["--url", "http://10.0.0.5:8501"], "argument --url: must be http://HOST:PORT with HOST one of 127.0.0.1, "
                                        "localhost, ::1 (loopback only) and a port, got 'http://10.0.0.5:8501'"),
    (["--url", "http://127.0.0.1"], "(loopback only) and a port, got 'http://127.0.0.1'"),
    (["--url", "https://localhost:8501"], "(loopback only) and a port, got 'https://localhost:8501'"),
    (["--think", "6,2"], "argument --think: must be LOW,HIGH seconds with 0 <= LOW <= HIGH <= 600, e.g. '2,6'; "
                         "got '6,2'"),
    (["--think", "3"], "argument --think: must be LOW,HIGH seconds"),
    (["--timeout", "-1"], "argument --timeout: must be a number of seconds above 0 and at most 600, got '-1'"),
    (["--server-pid", "0"], "argument --server-pid: must be a process id (a whole number >= 1), got '0'"),
    (["--presets", "some"], "argument --presets: invalid choice: 'some'"),
])
def test_class_load_refuses_bad_arguments(args, message, capsys):
    with pytest.raises(SystemExit) as exited:
        _class_load().parse_args(args)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


def test_class_load_defaults_and_a_loopback_url():
    args = _class_load().parse_args(["--url", "http://localhost:8600/Queueing", "--think", "1.5,4"])
    assert (args.students, args.minutes, args.think, args.presets) == (10, 2.0, (1.5, 4.0), "first")
    assert args.url == "http://localhost:8600"  # the base URL: the students add /_stcore/stream


def test_class_load_says_when_no_server_answers():
    # A port nothing listens on (bound here, never listened to): exit 2, no class is started.
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        done = subprocess.run([sys.executable, str(SCRIPT.parent / "class_load.py"), "--url",
                               f"http://127.0.0.1:{port}", "--minutes", "0.01"],
                              capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 2
    assert f"--url: no Streamlit app answers http://127.0.0.1:{port}/_stcore/health" in done.stderr


def test_class_load_percentiles_are_nearest_rank():
    class_load = _class_load()
    values = [float(v) for v in range(1, 21)]  # 1..20
    # p50: ceil(0.50 * 20) = 10th value; p95: ceil(0.95 * 20) = 19th; p100 the largest.
    assert class_load.percentile(values, 50) == 10.0
    assert class_load.percentile(values, 95) == 19.0
    assert class_load.percentile(values, 100) == 20.0
    assert class_load.percentile([0.4], 95) == 0.4
    with pytest.raises(ValueError, match="percentile of no values"):
        class_load.percentile([], 50)
    with pytest.raises(ValueError, match=r"q must be in \(0, 100\], got 0"):
        class_load.percentile(values, 0)


def test_class_load_summary_sorts_and_counts_errors():
    class_load = _class_load()
    # Three reruns out of order: p50 = ceil(1.5) = 2nd = 0.2 s, p95 = ceil(2.85) = 3rd = 0.9 s.
    summary = class_load.summarize([0.9, 0.1, 0.2], errors=1)
    assert summary == class_load.Summary(count=3, p50_s=0.2, p95_s=0.9, max_s=0.9, errors=1)
    assert class_load.format_row("Queueing", summary).split() == ["Queueing", "3", "200", "900", "900", "1"]
    assert class_load.summarize([], errors=2) == class_load.Summary(0, None, None, None, 2)
    assert class_load.format_row("all", class_load.summarize([], 0)).split() == ["all", "0", "-", "-", "-", "0"]


def test_class_load_rotates_lessons_then_presets():
    class_load = _class_load()
    assert [class_load.lesson_and_preset(k, every_preset=False) for k in range(6)] == [
        ("Queueing", None), ("Fairness", None), ("Cancellation", None), ("Preemption", None), ("Token_budget", None),
        ("Queueing", None)]
    # Students 0, 5, 10, ... share Queueing and take its presets in turn; Cancellation has three, so the fourth
    # Cancellation student (k = 17) is back on the first.
    assert class_load.lesson_and_preset(0, every_preset=True) == ("Queueing", "article_hol")
    assert class_load.lesson_and_preset(5, every_preset=True) == ("Queueing", "busy_server")
    assert class_load.lesson_and_preset(8, every_preset=True) == ("Preemption", "recompute_vs_swap")
    assert class_load.lesson_and_preset(4, every_preset=True) == ("Token_budget", "long_prompt")
    assert class_load.lesson_and_preset(14, every_preset=True) == ("Token_budget", "budget_memory")
    assert class_load.lesson_and_preset(17, every_preset=True) == ("Cancellation", "article_abandon")


def test_class_load_moves_a_slider_within_its_range_by_its_step():
    import random

    class_load = _class_load()
    tab = class_load.Tab(ws=None, lesson="Queueing")
    # max_num_seqs from 1 to 16 in steps of 1, at 1: a fifth of 15 steps is a move of up to 3, never 0.
    tab.sliders["s"] = class_load.Slider("s", min=1.0, max=16.0, step=1.0, value=1.0)
    rng = random.Random(0)
    seen = set()
    for _ in range(200):
        before = tab.sliders["s"].value
        tab.move_a_slider(rng)
        after = tab.sliders["s"].value
        assert after != before and 1.0 <= after <= 16.0 and abs(after - before) <= 3 and after == int(after)
        assert tab.moved == {"s": after}  # what the next rerun sends
        seen.add(after)
    assert seen == {float(v) for v in range(1, 17)}  # every value is reachable
    with pytest.raises(class_load.LoadError, match="Queueing: no slider ending in engine.num_blocks or"):
        class_load.Tab(ws=None, lesson="Queueing").move_a_slider(rng)


def test_class_load_sends_the_rerun_a_browser_tab_sends():
    from streamlit.proto.BackMsg_pb2 import BackMsg

    class_load = _class_load()
    tab = class_load.Tab(ws=None, lesson="Fairness", query_string="preset=rate_limits", moved={"slider-id": 64.0})
    first = BackMsg.FromString(tab.rerun_message()).rerun_script
    assert (first.page_name, first.page_script_hash, first.query_string) == ("Fairness", "", "preset=rate_limits")
    assert [(w.id, list(w.double_array_value.data)) for w in first.widget_states.widgets] == [("slider-id", [64.0])]
    assert (first.fragment_id, first.is_auto_rerun) == ("", False)
    tab.page_script_hash = "abc"  # once the server has named the page, the tab asks for it by its hash
    poll = BackMsg.FromString(tab.rerun_message(fragment_id="frag")).rerun_script
    assert (poll.page_name, poll.page_script_hash, poll.fragment_id, poll.is_auto_rerun) == ("", "abc", "frag", True)


def test_class_load_kills_a_replica_only_within_the_class_and_behind_serve_sh(capsys):
    class_load = _class_load()
    assert class_load.parse_args(["--minutes", "1", "--kill-replica-after", "20"]).kill_replica_after == 20.0
    for args, message in ((["--minutes", "0.5", "--kill-replica-after", "30"], "must come before the class ends"),
                          (["--kill-replica-after", "5", "--start-server"], "needs replicas behind deploy/serve.sh"),
                          (["--kill-replica-after", "0"], "must be a number of seconds above 0")):
        with pytest.raises(SystemExit):
            class_load.parse_args(args)
        assert message in capsys.readouterr().err


def test_class_load_keeps_the_replica_cookie_as_a_browser_does():
    class_load = _class_load()
    browser = class_load.Browser("http://127.0.0.1:8080")
    assert browser.replica is None and browser.headers() == {}
    browser.take_cookies(["_streamlit_xsrf=2|c2d6|97d4|1796; Path=/; SameSite=Lax",
                          "schedlab_replica=r2; Path=/; HttpOnly; SameSite=Lax"])
    assert browser.replica == "r2" and browser.headers() == {"Cookie": "schedlab_replica=r2"}
    browser.take_cookies(["schedlab_replica=r3; Path=/; HttpOnly; SameSite=Lax"])  # nginx moved it
    assert browser.replica == "r3"


def test_class_load_keeps_the_pages_state_across_a_new_session():
    class_load = _class_load()
    tab = class_load.Tab(ws="old", lesson="Queueing", page_script_hash="abc", query_string="mode=free",
                         moved={"s": 3.0}, polls={"frag": 1.0}, exceptions=["boom"], is_full_run_pending=True)
    tab.new_session("new")
    assert (tab.ws, tab.page_script_hash, tab.query_string, tab.moved) == ("new", "abc", "mode=free", {"s": 3.0})
    assert (tab.polls, tab.exceptions, tab.is_full_run_pending) == ({}, [], False)


def test_class_load_kill_figures_split_the_killed_replicas_students_from_the_others():
    class_load = _class_load()
    logs = [class_load.StudentLog("Queueing", replica="r1"), class_load.StudentLog("Fairness", replica="r2"),
            class_load.StudentLog("Preemption", replica="r2"), class_load.StudentLog("Cancellation", replica="r1")]
    kill = class_load.Kill(after_s=20, replica="r1", pid=1, at=100.0, students=[0, 3])
    reconnect = class_load.Reconnect
    logs[0].reconnects = [reconnect(50.0, 50.1, 50.5, "r1"), reconnect(100.1, 100.2, 101.2, "r2"),
                          reconnect(110.0, 110.1, 110.5, "r2")]
    logs[3].errors = ["Cancellation: connection lost, and no new session served the page within 60 s"]
    logs[1].reconnects = [reconnect(100.2, 100.3, 100.6, "r2")]
    figures = class_load.kill_figures(kill, logs)
    assert figures.killed_students == 2 and figures.not_back == 1
    assert figures.back_s == [pytest.approx(1.2)] and figures.connected_s == [pytest.approx(0.2)]
    assert (figures.killed_errors, figures.other_students, figures.other_errors, figures.other_drops) == (1, 2, 0, 1)


def _player_under_load():
    return _benchmark("player_under_load")


@pytest.mark.parametrize(("args", "message"), [
    (["--url", "http://example.com:8501"], "--url: must be a loopback address"),
    (["--url", "http://127.0.0.1:8501", "--seconds", "0.5"], "--seconds: must be from 1 to 60, got 0.5"),
    (["--url", "http://127.0.0.1:8501", "--rounds", "11"], "--rounds: must be from 1 to 10, got 11"),
    ([], "the following arguments are required: --url"),
])
def test_player_under_load_refuses_bad_arguments(args, message, capsys):
    with pytest.raises(SystemExit) as exited:
        _player_under_load().parse_args(args)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
    assert _player_under_load().parse_args(["--url", "http://localhost:8501"]).seconds == 10.0
