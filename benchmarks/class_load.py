"""A class on one server: N simulated students, each on a lesson, moving a slider every few seconds.

    .venv/bin/python benchmarks/class_load.py [--students 10] [--minutes 2] [--url http://127.0.0.1:8501]
                                              [--start-server] [--server-pid PID] [--seed 0]
                                              [--kill-replica-after S]

Each student speaks Streamlit's own websocket protocol (``/_stcore/stream``, the ``BackMsg``/``ForwardMsg``
protobufs Streamlit ships), as a browser tab does, without a browser: student k opens lesson k mod 5 (Queueing,
Fairness, Cancellation, Preemption, Token budget; with ``--presets all`` the lesson's presets in turn too), then,
after a think time drawn from ``--think`` (seeded), moves the KV pool or the ``max_num_seqs`` slider by up to a
fifth of its range and sends the rerun a released slider sends.

- "rerun" is the time from sending that rerun to the end of the page's script run (its ``script_finished``):
  what the issue's "slider release to finished rerun" means.
- "settled" is until the page is complete: a sweep that fills in after the rerun (ui/sweeps.py) is polled as the
  browser polls it (the fragment's ``auto_rerun`` interval, one poll at a time) until its last point is in.
- errors: an exception box on the page, a script that does not compile, a rerun that has not settled within
  ``--timeout`` s, or a lost connection that no new session replaced within ``--timeout`` s. An ``st.error`` a
  setting earns ("Invalid setting") is the page's answer, not an error.
- reconnects: a student whose connection drops (its replica died) does what a browser tab does: it opens a new
  session (a new websocket; the health check first, at once, then after a growing wait, 0.5 s doubling up to 5 s),
  with the replica cookie nginx gave it (``deploy/serve.sh``), and sends its page's rerun with the page's query
  string and the sliders it moved. The time from the drop to the end of that rerun is its reconnection time.

``--kill-replica-after S`` (replicas behind ``deploy/serve.sh`` only): S seconds into the class, SIGKILL the replica
that serves the most students (the cookie names each student's replica), and report the errors of the other
replicas' students (and whether their connections dropped) and the time from the kill until each of the killed
replica's students was served again by another replica.

The server's memory is read from /proc/<pid>/status (VmRSS) at the start, every second (peak) and at the end, for
the server and for it with every process under it (its workers, ui/background.py; behind ``deploy/serve.sh``,
every replica, its workers and nginx). The server is ``--server-pid``, else ``deploy/serve.sh`` when its nginx
listens on the URL's port, else the process listening there, else the one ``--start-server`` starts
(``streamlit run app.py`` on that port, stopped at the end). Loopback only, and bounded: at most MAX_STUDENTS
students for at most MAX_MINUTES. The students share one process with one event loop; on a 2-core machine it takes
some of the CPU the server would otherwise have, so the figures are a little pessimistic.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from http.cookies import CookieError, SimpleCookie
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from anywhere: the repo root on the path (sim.presets for --presets all)

# page names (pages/1_Queueing.py ... 5_Token_budget.py) -> the lesson's name in sim.presets
LESSONS = {"Queueing": "queueing", "Fairness": "fairness", "Cancellation": "cancellation",
           "Preemption": "preemption", "Token_budget": "budget"}
MOVED_SLIDERS = ("engine.num_blocks", "engine.pool_gib", "engine.max_num_seqs")  # key endings (ui/knobs.py)
MAX_STUDENTS = 200
MAX_MINUTES = 60.0
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
MAX_MOVE_FRACTION = 0.2  # a slider moves by up to this share of its range
SERVER_START_TIMEOUT_S = 60
MEMORY_EVERY_S = 1.0
SERVER_LOG_LINES = 60  # printed after a class with errors on a server this script started
REPLICA_COOKIE = "schedlab_replica"  # deploy/serve.sh's nginx: names the replica that serves the browser (r1, r2 ...)
RECONNECT_FIRST_WAIT_S = 0.5  # a dropped student tries at once, then after 0.5 s, 1 s, 2 s ... (at most the next)
RECONNECT_MAX_WAIT_S = 5.0


# --- arguments -------------------------------------------------------------------------------------------------

def _students(text: str) -> int:
    if not text.strip().isdigit() or not 1 <= int(text) <= MAX_STUDENTS:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_STUDENTS}, got {text!r}")
    return int(text)


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= MAX_MINUTES:  # (NaN fails too)
        raise argparse.ArgumentTypeError(f"must be a number of minutes above 0 and at most {MAX_MINUTES:g}, "
                                         f"got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 600:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0 and at most 600, got {text!r}")
    return value


def _think(text: str) -> tuple[float, float]:
    """'LOW,HIGH' seconds between a student's reruns, e.g. '2,6'."""
    parts = text.split(",")
    try:
        low, high = (float(p) for p in parts)
    except ValueError:
        low = high = math.nan
    if not 0 <= low <= high <= 600:
        raise argparse.ArgumentTypeError(f"must be LOW,HIGH seconds with 0 <= LOW <= HIGH <= 600, e.g. '2,6'; "
                                         f"got {text!r}")
    return low, high


def _pid(text: str) -> int:
    if not text.strip().isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a process id (a whole number >= 1), got {text!r}")
    return int(text)


def _loopback_url(text: str) -> str:
    parts = urlsplit(text)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or parts.hostname not in LOOPBACK_HOSTS or port is None:
        raise argparse.ArgumentTypeError(
            f"must be http://HOST:PORT with HOST one of {', '.join(LOOPBACK_HOSTS)} (loopback only) and a port, "
            f"got {text!r}")
    return f"http://{parts.netloc}"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=_students, default=10, help=f"simulated students (1..{MAX_STUDENTS})")
    parser.add_argument("--minutes", type=_minutes, default=2.0, help=f"length of the class (0..{MAX_MINUTES:g})")
    parser.add_argument("--url", type=_loopback_url, default="http://127.0.0.1:8501",
                        help="the app's base URL, loopback only")
    parser.add_argument("--think", type=_think, default=(2.0, 6.0),
                        help="LOW,HIGH seconds a student waits between slider moves (uniform, seeded)")
    parser.add_argument("--timeout", type=_seconds, default=60.0,
                        help="seconds a rerun may take before it counts as an error")
    parser.add_argument("--presets", choices=("first", "all"), default="first",
                        help="first: every student on the lesson's first preset (the article's example); all: "
                             "students rotate over each lesson's presets too (the busy ones included)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the students' think times and moves")
    parser.add_argument("--server-pid", type=_pid, default=None,
                        help="the server's process id (default: the process listening on the URL's port)")
    parser.add_argument("--start-server", action="store_true",
                        help="start `streamlit run app.py` on the URL's port and stop it at the end")
    parser.add_argument("--kill-replica-after", type=_seconds, default=None, metavar="S",
                        help="S seconds into the class, SIGKILL the replica (deploy/serve.sh) serving the most "
                             "students, and report how its students and the others fared")
    args = parser.parse_args(argv)
    if args.kill_replica_after is not None and args.kill_replica_after >= args.minutes * 60:
        parser.error(f"argument --kill-replica-after: must come before the class ends ({args.minutes * 60:g} s), "
                     f"got {args.kill_replica_after:g}")
    if args.kill_replica_after is not None and args.start_server:
        parser.error("argument --kill-replica-after: needs replicas behind deploy/serve.sh, not --start-server")
    return args


# --- statistics ------------------------------------------------------------------------------------------------

def percentile(sorted_values: list[float], q: float) -> float:
    """The nearest-rank q-th percentile (0 < q <= 100) of values sorted ascending: the smallest value with at
    least q% of the values at or below it (no interpolation: a figure that was measured)."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    if not 0 < q <= 100:
        raise ValueError(f"q must be in (0, 100], got {q}")
    rank = math.ceil(q / 100 * len(sorted_values))
    return sorted_values[rank - 1]


@dataclass(frozen=True)
class Summary:
    count: int
    p50_s: float | None  # None when nothing was measured
    p95_s: float | None
    max_s: float | None
    errors: int


def summarize(times_s: list[float], errors: int) -> Summary:
    values = sorted(times_s)
    if not values:
        return Summary(0, None, None, None, errors)
    return Summary(len(values), percentile(values, 50), percentile(values, 95), values[-1], errors)


def format_row(name: str, summary: Summary) -> str:
    def ms(value: float | None) -> str:
        return "-" if value is None else f"{value * 1e3:,.0f}"

    return (f"{name:<14} {summary.count:>6} {ms(summary.p50_s):>9} {ms(summary.p95_s):>9} "
            f"{ms(summary.max_s):>9} {summary.errors:>6}")


TABLE_HEADER = f"{'lesson':<14} {'count':>6} {'p50 ms':>9} {'p95 ms':>9} {'max ms':>9} {'errors':>6}"


# --- the server's process and memory ---------------------------------------------------------------------------

def _listening_inodes(port: int) -> set[str]:
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A = LISTEN
                inodes.add(inode)
    return inodes


def find_pid_by_port(port: int) -> int | None:
    """The process listening on a TCP port (via /proc: needs permission to read its fds, e.g. the same user)."""
    wanted = {f"socket:[{inode}]" for inode in _listening_inodes(port)}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in wanted for fd in (proc / "fd").iterdir()):
                return int(proc.name)
        except OSError:
            continue
    return None


def rss_kib(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def parent_pid(pid: int) -> int | None:
    try:  # (field 4 of stat, after the command in parentheses)
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def descendants(pid: int) -> set[int]:
    """Every process whose chain of parents leads to ``pid`` (a server's workers; for serve.sh, its replicas, their
    workers, nginx and its workers), from one read of /proc."""
    parents = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and (parent := parent_pid(int(proc.name))) is not None:
            parents[int(proc.name)] = parent
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def serve_sh_pid(pid: int) -> int | None:
    """``deploy/serve.sh`` when it is ``pid`` or runs it (its nginx listens on the class's port), else None."""
    for _ in range(4):  # (nginx's worker, its master, serve.sh)
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return None
        if any(Path(os.fsdecode(part)).name == "serve.sh" for part in command[:3]):
            return pid
        parent = parent_pid(pid)
        if parent is None or parent <= 1:
            return None
        pid = parent
    return None


def replica_pids(serve_pid: int) -> dict[str, int]:
    """{the replica's cookie value (r1, r2 ...): its pid} for the replicas ``deploy/serve.sh`` runs now: its children
    that it named with SCHEDLAB_REPLICA (their own workers inherit the name, but are not its children)."""
    found = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and parent_pid(int(proc.name)) == serve_pid:
            try:
                environment = (proc / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            for entry in environment:
                if entry.startswith(b"SCHEDLAB_REPLICA="):
                    found["r" + entry.split(b"=", 1)[1].decode()] = int(proc.name)
    return found


def memory_kib(pid: int) -> tuple[int | None, int | None]:
    """(the server's RSS, the RSS of the server and every process under it), in KiB. (For replicas started by
    ``deploy/serve.sh``, pass its pid: the second figure is then every replica, its workers and nginx.)"""
    own = rss_kib(pid)
    if own is None:
        return None, None
    return own, own + sum(rss_kib(child) or 0 for child in descendants(pid))


@dataclass
class MemoryWatch:
    pid: int
    start: tuple[int | None, int | None] = (None, None)
    peak: tuple[int, int] = (0, 0)
    end: tuple[int | None, int | None] = (None, None)

    def sample(self) -> tuple[int | None, int | None]:
        now = memory_kib(self.pid)
        self.peak = (max(self.peak[0], now[0] or 0), max(self.peak[1], now[1] or 0))
        return now

    async def watch(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.sample()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), MEMORY_EVERY_S)


def _mib(kib: int | None) -> str:
    return "?" if kib is None else f"{kib / 1024:,.0f} MiB"


# --- one student -----------------------------------------------------------------------------------------------

class LoadError(Exception):
    """A rerun that failed: what the errors column counts."""


class RerunTimeout(LoadError):
    """A rerun that did not settle in time: the student stops."""


@dataclass
class Slider:
    id: str
    min: float
    max: float
    step: float
    value: float


@dataclass
class Tab:
    """What a browser tab knows about its session: the page, the URL's query string, the widgets it has moved,
    the sliders the page drew and the fragments that asked to be polled (id -> interval s)."""

    ws: object
    lesson: str
    page_script_hash: str = ""
    query_string: str = ""
    moved: dict[str, float] = field(default_factory=dict)
    sliders: dict[str, Slider] = field(default_factory=dict)
    polls: dict[str, float] = field(default_factory=dict)
    exceptions: list[str] = field(default_factory=list)
    is_full_run_pending: bool = False

    def rerun_message(self, fragment_id: str = "") -> bytes:
        from streamlit.proto.BackMsg_pb2 import BackMsg

        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self.query_string
        state.page_name = "" if self.page_script_hash else self.lesson  # by name until the server says its hash
        state.page_script_hash = self.page_script_hash
        state.fragment_id = fragment_id
        state.is_auto_rerun = bool(fragment_id)
        for widget_id, value in self.moved.items():
            widget = state.widget_states.widgets.add()
            widget.id = widget_id
            widget.double_array_value.data.append(value)  # a slider's value, as the frontend sends it
        return msg.SerializeToString()

    def _read(self, fm) -> int | None:
        """Take in one ForwardMsg; the script_finished status if it is one."""
        kind = fm.WhichOneof("type")
        if kind == "script_finished":
            return fm.script_finished
        if kind == "page_info_changed":
            self.query_string = fm.page_info_changed.query_string
        elif kind == "new_session" and not fm.metadata.run.fragment_ids:
            # A full script run starts (a fragment's st.rerun() starts one too; a fragment's run has its id here):
            # its fragments ask anew to be polled (a poll of one it did not draw gets no answer).
            self.polls.clear()
            self.is_full_run_pending = True
        elif kind == "navigation":
            self.page_script_hash = fm.navigation.page_script_hash
        elif kind == "auto_rerun":
            self.polls[fm.auto_rerun.fragment_id] = fm.auto_rerun.interval
        elif kind == "stop_auto_rerun":
            for fragment_id in fm.stop_auto_rerun.fragment_ids:
                self.polls.pop(fragment_id, None)
        elif kind == "delta" and fm.delta.WhichOneof("type") == "new_element":
            element = fm.delta.new_element
            which = element.WhichOneof("type")
            if which == "exception":  # (read on to the end of the run: the next rerun must start clean)
                self.exceptions.append(element.exception.message[:200])
            if which == "slider" and element.slider.id.endswith(MOVED_SLIDERS):
                s = element.slider
                value = s.value[0] if s.set_value and s.value else s.default[0]
                self.sliders[s.id] = Slider(s.id, s.min, s.max, s.step, self.moved.get(s.id, value))
        return None

    async def rerun(self, timeout_s: float) -> tuple[float, float]:
        """Send a rerun; (s until its script run ended, s until its sweeps were in and the page settled)."""
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        sent = time.perf_counter()
        deadline = sent + timeout_s
        await self.ws.send(self.rerun_message())
        rerun_s, waiting_polls, last_message = None, 0, sent
        while True:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:  # (the tab is out of step with its session now: the student leaves)
                raise RerunTimeout(
                    f"{self.lesson}: rerun not settled within {timeout_s:g} s (script run "
                    f"{'finished' if rerun_s is not None else 'not finished'}, {len(self.polls)} fragment(s) "
                    f"polled, {waiting_polls} poll(s) unanswered, a full run pending: {self.is_full_run_pending}; "
                    f"last message {time.perf_counter() - last_message:.1f} s ago)")
            try:
                raw = await asyncio.wait_for(self.ws.recv(), remaining)
            except TimeoutError:
                continue
            last_message = time.perf_counter()
            fm = ForwardMsg()
            fm.ParseFromString(raw)
            status = self._read(fm)
            if status is None:
                continue
            if status == ForwardMsg.FINISHED_WITH_COMPILE_ERROR:
                raise LoadError(f"{self.lesson}: the script did not compile")
            now = time.perf_counter()
            if status == ForwardMsg.FINISHED_SUCCESSFULLY:
                rerun_s = now - sent if rerun_s is None else rerun_s
                self.is_full_run_pending = False
                waiting_polls = 0
            elif status == ForwardMsg.FINISHED_FRAGMENT_RUN_SUCCESSFULLY:
                waiting_polls = max(waiting_polls - 1, 0)
            if rerun_s is None or self.is_full_run_pending or status == ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                continue  # (a run that ended early for a rerun: the rerun's own end is still to come)
            if not self.polls:
                if self.exceptions:
                    text, self.exceptions = "; ".join(self.exceptions), []
                    raise LoadError(f"{self.lesson}: exception on the page: {text}")
                return rerun_s, now - sent
            if waiting_polls == 0:
                # The browser polls a fragment every `interval` s; one poll at a time here (a poll the server
                # is still running would only queue behind it).
                await asyncio.sleep(min(self.polls.values()))
                for fragment_id in list(self.polls):
                    await self.ws.send(self.rerun_message(fragment_id))
                waiting_polls = len(self.polls)

    async def idle(self, seconds: float) -> None:
        """The student thinks for ``seconds``; what the server sends meanwhile is read, as a browser reads it, so a
        connection that drops (its replica died) raises at once (websockets' ConnectionClosed), not at the next
        rerun."""
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        deadline = time.perf_counter() + seconds
        while (remaining := deadline - time.perf_counter()) > 0:
            try:
                raw = await asyncio.wait_for(self.ws.recv(), remaining)
            except TimeoutError:
                return
            fm = ForwardMsg()
            fm.ParseFromString(raw)
            self._read(fm)

    def new_session(self, ws: object) -> None:
        """A new connection, and with it a new session on the server: what the tab knows of the page stays (the
        page, its query string, the sliders moved, the last values drawn); what the old session had asked for goes."""
        self.ws = ws
        self.polls.clear()
        self.exceptions.clear()
        self.is_full_run_pending = False

    def move_a_slider(self, rng: random.Random) -> None:
        """Move the KV pool or max_num_seqs slider by up to MAX_MOVE_FRACTION of its range, never to where it is."""
        if not self.sliders:
            raise LoadError(f"{self.lesson}: no slider ending in {' or '.join(MOVED_SLIDERS)} on the page")
        slider = self.sliders[rng.choice(sorted(self.sliders))]
        num_steps = round((slider.max - slider.min) / slider.step)
        max_move = max(1, round(num_steps * MAX_MOVE_FRACTION))
        at = round((slider.value - slider.min) / slider.step)
        to = at
        while to == at:
            to = min(max(at + rng.randint(-max_move, max_move), 0), num_steps)
        slider.value = slider.min + to * slider.step
        self.moved[slider.id] = slider.value


def lesson_and_preset(k: int, every_preset: bool) -> tuple[str, str | None]:
    """Student k's lesson (k mod 5) and, with every_preset, its preset: the lesson's presets in turn, so students
    k, k+5, k+10, ... take its first, second, third ... preset (None: the page's default)."""
    lesson = list(LESSONS)[k % len(LESSONS)]
    if not every_preset:
        return lesson, None
    from sim import presets

    keys = [p.key for p in presets.presets_for(LESSONS[lesson])]
    return lesson, keys[(k // len(LESSONS)) % len(keys)]


@dataclass(frozen=True)
class Reconnect:
    """One dropped connection replaced (perf_counter times)."""

    dropped: float
    connected: float  # the new websocket open
    served: float  # the page's rerun finished on the new session
    replica: str | None  # the new session's replica


@dataclass
class StudentLog:
    lesson: str
    open_s: list[float] = field(default_factory=list)
    rerun_s: list[float] = field(default_factory=list)
    settled_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    replica: str | None = None  # the replica serving the student now (deploy/serve.sh's cookie); None without one
    reconnects: list[Reconnect] = field(default_factory=list)


@dataclass
class Browser:
    """What a browser keeps from one connection to the next: the cookie by which nginx keeps it on one replica
    (deploy/serve.sh), and sets anew when it moves the browser to another."""

    base_url: str
    cookies: dict[str, str] = field(default_factory=dict)

    @property
    def replica(self) -> str | None:
        return self.cookies.get(REPLICA_COOKIE)

    def take_cookies(self, set_cookie_headers: list[str]) -> None:
        for header in set_cookie_headers:
            jar = SimpleCookie()
            with contextlib.suppress(CookieError):  # (Streamlit's own cookie is of no use here)
                jar.load(header)
            if REPLICA_COOKIE in jar:
                self.cookies[REPLICA_COOKIE] = jar[REPLICA_COOKIE].value

    def headers(self) -> dict[str, str]:
        return {"Cookie": "; ".join(f"{k}={v}" for k, v in self.cookies.items())} if self.cookies else {}

    def check_health(self, timeout_s: float) -> None:
        """GET /_stcore/health, as Streamlit's page does before it opens its websocket (and nginx's answer may set
        the cookie); OSError when the server does not answer 200."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback never via a proxy
        request = urllib.request.Request(f"{self.base_url}/_stcore/health", headers=self.headers())
        with opener.open(request, timeout=timeout_s) as response:
            self.take_cookies(response.headers.get_all("Set-Cookie") or [])
            if response.status != 200:
                raise OSError(f"/_stcore/health answered {response.status}")

    async def open(self, timeout_s: float) -> object:
        """A new websocket to the app: a new Streamlit session."""
        import websockets

        await asyncio.to_thread(self.check_health, timeout_s)
        ws_url = "ws" + self.base_url.removeprefix("http") + "/_stcore/stream"
        # proxy=None: a proxy in the environment must never see loopback traffic.
        ws = await websockets.connect(ws_url, subprotocols=["streamlit"], max_size=None, proxy=None,
                                      open_timeout=timeout_s, additional_headers=self.headers())
        self.take_cookies(ws.response.headers.get_all("Set-Cookie"))
        return ws


async def reconnect(tab: Tab, browser: Browser, log: StudentLog, args: argparse.Namespace, dropped_at: float) -> None:
    """The connection dropped: as a browser tab does, open a new session (at once, then after a growing wait) and
    send the page's rerun, with its query string and the sliders moved. LoadError when no session served it
    within --timeout s of the drop."""
    import websockets

    deadline = dropped_at + args.timeout
    wait_s, last = RECONNECT_FIRST_WAIT_S, ""
    while (remaining := deadline - time.perf_counter()) > 0:
        with contextlib.suppress(Exception):
            await tab.ws.close()
        try:
            tab.new_session(await browser.open(remaining))
            connected = time.perf_counter()
            log.replica = browser.replica
            try:
                await tab.rerun(max(deadline - time.perf_counter(), 0.1))
            except RerunTimeout:
                raise
            except LoadError as exc:  # (served, with an error on the page: counted, and the student goes on)
                log.errors.append(str(exc))
            log.reconnects.append(Reconnect(dropped_at, connected, time.perf_counter(), browser.replica))
            return
        except (OSError, websockets.WebSocketException) as exc:
            last = f"{type(exc).__name__}: {exc}"
        await asyncio.sleep(max(min(wait_s, deadline - time.perf_counter()), 0))
        wait_s = min(wait_s * 2, RECONNECT_MAX_WAIT_S)
    raise LoadError(f"{tab.lesson}: connection lost, and no new session served the page within {args.timeout:g} s "
                    f"({last or 'no answer'})")


async def student(k: int, args: argparse.Namespace, class_ends: float, log: StudentLog) -> None:
    """Student k: opens lesson k mod 5, then moves a slider after each think time until the class ends; reconnects
    when its connection drops. What happened goes into ``log``."""
    import websockets

    rng = random.Random(f"{args.seed}:{k}")
    lesson, preset = lesson_and_preset(k, args.presets == "all")
    browser = Browser(args.url)
    # (the lesson's free page, with its sliders: a first visit with no settings opens the guided path)
    tab = Tab(None, lesson, query_string=f"preset={preset}" if preset else "mode=free")
    await asyncio.sleep(rng.uniform(*args.think))  # the class does not open its laptops in the same millisecond
    try:
        tab.ws = await browser.open(args.timeout)
        log.replica = browser.replica
        log.open_s.append((await tab.rerun(args.timeout))[0])
        while True:
            try:
                await tab.idle(rng.uniform(*args.think))
                if time.perf_counter() >= class_ends:
                    return
                tab.move_a_slider(rng)
                rerun_s, settled_s = await tab.rerun(args.timeout)
            except RerunTimeout:
                raise
            except LoadError as exc:
                log.errors.append(str(exc))
                continue
            except (OSError, websockets.ConnectionClosed):
                await reconnect(tab, browser, log, args, time.perf_counter())
                continue
            log.rerun_s.append(rerun_s)
            log.settled_s.append(settled_s)
    except (LoadError, OSError, websockets.WebSocketException) as exc:
        log.errors.append(f"{log.lesson}: {type(exc).__name__}: {exc}")
    finally:
        if tab.ws is not None:
            with contextlib.suppress(Exception):
                await tab.ws.close()


@dataclass
class Kill:
    """--kill-replica-after: what was killed, when, and who was on it."""

    after_s: float
    replica: str | None = None  # its cookie value (r1, r2 ...)
    pid: int | None = None
    at: float | None = None  # perf_counter
    students: list[int] = field(default_factory=list)  # the students it served then
    note: str = ""  # why none was killed


async def kill_a_replica(kill: Kill, serve_pid: int, logs: list[StudentLog]) -> None:
    """After kill.after_s s: SIGKILL the replica that serves the most students (the lowest name on a tie)."""
    await asyncio.sleep(kill.after_s)
    counts = Counter(log.replica for log in logs if log.replica)
    if not counts:
        kill.note = "no student had a replica cookie (is the URL deploy/serve.sh's nginx?)"
        return
    replica = min(counts, key=lambda r: (-counts[r], r))
    pid = replica_pids(serve_pid).get(replica)
    if pid is None:
        kill.note = f"no process of deploy/serve.sh (pid {serve_pid}) is replica {replica}"
        return
    kill.replica, kill.pid, kill.at = replica, pid, time.perf_counter()
    kill.students = [k for k, log in enumerate(logs) if log.replica == replica]
    os.kill(pid, signal.SIGKILL)


@dataclass(frozen=True)
class KillFigures:
    killed_students: int
    back_s: list[float]  # per killed student served again: from the kill to the end of its first rerun after it
    connected_s: list[float]  # the same students: from the kill to their new websocket
    not_back: int  # killed students never served again
    killed_errors: int
    other_students: int
    other_errors: int
    other_drops: int  # reconnections of the other students after the kill (the others should never notice)


def kill_figures(kill: Kill, logs: list[StudentLog]) -> KillFigures:
    killed = set(kill.students)
    back, connected = [], []
    for k in killed:
        after = [r for r in logs[k].reconnects if r.dropped >= kill.at]
        if after:
            back.append(after[0].served - kill.at)
            connected.append(after[0].connected - kill.at)
    others = [log for k, log in enumerate(logs) if k not in killed]
    return KillFigures(
        killed_students=len(killed), back_s=sorted(back), connected_s=sorted(connected),
        not_back=len(killed) - len(back),
        killed_errors=sum(len(logs[k].errors) for k in killed), other_students=len(others),
        other_errors=sum(len(log.errors) for log in others),
        other_drops=sum(1 for log in others for r in log.reconnects if r.dropped >= kill.at))


# --- the class -------------------------------------------------------------------------------------------------

def _is_healthy(base_url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback traffic never via a proxy
    try:
        with opener.open(f"{base_url}/_stcore/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def start_server(base_url: str, log_path: Path) -> subprocess.Popen:
    """`streamlit run app.py` on the URL's port, loopback only; returns once it answers its health check."""
    parts = urlsplit(base_url)
    if _is_healthy(base_url):
        raise SystemExit(f"--start-server: something already answers on {base_url}; pick a free port in --url")
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
               "--server.port", str(parts.port), "--server.address", parts.hostname,
               "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none"]
    with log_path.open("wb") as log:  # a file, not a pipe: a full pipe would block the server
        process = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log,
                                   stderr=subprocess.STDOUT)
    deadline = time.monotonic() + SERVER_START_TIMEOUT_S
    while not _is_healthy(base_url):
        if process.poll() is not None or time.monotonic() > deadline:
            stop_server(process)
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
            raise SystemExit(f"--start-server: the app did not start on {base_url}; its output:\n{tail}")
        time.sleep(0.25)
    return process


def stop_server(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def run_class(args: argparse.Namespace, memory: MemoryWatch, serve_pid: int | None = None,
                    kill: Kill | None = None) -> list[StudentLog]:
    stop = asyncio.Event()
    watcher = asyncio.create_task(memory.watch(stop))
    class_ends = time.perf_counter() + args.minutes * 60
    logs = [StudentLog(lesson_and_preset(k, args.presets == "all")[0]) for k in range(args.students)]
    killer = asyncio.create_task(kill_a_replica(kill, serve_pid, logs)) if kill is not None else None
    try:
        await asyncio.gather(*(student(k, args, class_ends, logs[k]) for k in range(args.students)))
        return logs
    finally:
        if killer is not None:
            killer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await killer
        stop.set()
        await watcher


@dataclass
class ClassResult:
    logs: list[StudentLog]
    memory: MemoryWatch
    kill: Kill | None
    wall_s: float


def run(args: argparse.Namespace, pid: int, serve_pid: int | None = None) -> ClassResult:
    """The class against the app at args.url; ``pid`` the process whose memory is watched, ``serve_pid`` the
    deploy/serve.sh whose replica --kill-replica-after kills."""
    memory = MemoryWatch(pid)
    memory.start = memory.sample()
    kill = Kill(args.kill_replica_after) if args.kill_replica_after is not None else None
    started = time.perf_counter()
    logs = asyncio.run(run_class(args, memory, serve_pid, kill))
    memory.end = memory.sample()
    return ClassResult(logs, memory, kill, time.perf_counter() - started)


def _seconds_figures(values: list[float]) -> str:
    if not values:
        return "-"
    values = sorted(values)
    return f"p50 {percentile(values, 50):.2f} s, p95 {percentile(values, 95):.2f} s, max {values[-1]:.2f} s"


def report(args: argparse.Namespace, result: ClassResult) -> None:
    logs, memory = result.logs, result.memory
    print(f"{args.students} students for {args.minutes:g} min on {args.url}, presets: {args.presets} "
          f"(think {args.think[0]:g}-{args.think[1]:g} s, seed {args.seed}); {result.wall_s:.0f} s wall; load "
          f"average now {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs")
    for title, attribute in (("rerun: slider release -> script run finished", "rerun_s"),
                             ("settled: until the page's sweeps are in", "settled_s"),
                             ("first open of the page", "open_s")):
        print(f"\n{title}\n{TABLE_HEADER}")
        for lesson in LESSONS:
            mine = [log for log in logs if log.lesson == lesson]
            if mine:
                times = [t for log in mine for t in getattr(log, attribute)]
                print(format_row(lesson, summarize(times, sum(len(log.errors) for log in mine))))
        every = summarize([t for log in logs for t in getattr(log, attribute)], sum(len(lg.errors) for lg in logs))
        print(format_row("all", every))
    reconnects = [r for log in logs for r in log.reconnects]
    print(f"\nconnections dropped and replaced by a new session: {len(reconnects)}; from the drop to the new "
          f"websocket: {_seconds_figures([r.connected - r.dropped for r in reconnects])}; to the page's rerun "
          f"served: {_seconds_figures([r.served - r.dropped for r in reconnects])}")
    placed = Counter(log.replica for log in logs if log.replica)
    if placed:
        print("students per replica at the end: " + ", ".join(f"{r} {placed[r]}" for r in sorted(placed)))
    kill = result.kill
    if kill is not None:
        if kill.at is None:
            print(f"\n--kill-replica-after {kill.after_s:g}: no replica killed: {kill.note}")
        else:
            figures = kill_figures(kill, logs)
            print(f"\nreplica {kill.replica} (pid {kill.pid}) killed with SIGKILL {kill.after_s:g} s into the class, "
                  f"serving {figures.killed_students} of {args.students} students")
            print(f"  its students: {len(figures.back_s)} served again by another replica; from the kill to their "
                  f"new websocket: {_seconds_figures(figures.connected_s)}; to the end of their page's rerun: "
                  f"{_seconds_figures(figures.back_s)}; {figures.not_back} never served again; errors "
                  f"{figures.killed_errors}")
            print(f"  the other {figures.other_students} students: errors {figures.other_errors}, connections "
                  f"dropped after the kill {figures.other_drops}")
    print(f"\nserver pid {memory.pid} RSS: start {_mib(memory.start[0])}, peak {_mib(memory.peak[0])}, "
          f"end {_mib(memory.end[0])}; with every process under it: start {_mib(memory.start[1])}, "
          f"peak {_mib(memory.peak[1])}, end {_mib(memory.end[1])}")
    errors = [e for log in logs for e in log.errors]
    for text in sorted(set(errors))[:10]:
        print(f"error x{errors.count(text)}: {text}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    port = urlsplit(args.url).port
    server = None
    with tempfile.TemporaryDirectory(prefix="class_load-") as tmp:
        try:
            if args.start_server:
                server = start_server(args.url, Path(tmp) / "server.log")
            elif not _is_healthy(args.url):
                print(f"--url: no Streamlit app answers {args.url}/_stcore/health; start one or pass "
                      "--start-server", file=sys.stderr)
                return 2
            listener = server.pid if server else find_pid_by_port(port)
            serve_pid = serve_sh_pid(args.server_pid or listener) if (args.server_pid or listener) else None
            pid = args.server_pid or serve_pid or listener
            if pid is None or rss_kib(pid) is None:
                print(f"--server-pid: cannot read the memory of the process on port {port} "
                      f"({'not found' if pid is None else f'pid {pid}'}); pass its pid", file=sys.stderr)
                return 2
            if args.kill_replica_after is not None and serve_pid is None:
                print(f"--kill-replica-after: no deploy/serve.sh found behind {args.url} (its nginx listening on "
                      f"the port, or --server-pid); it kills one of serve.sh's replicas", file=sys.stderr)
                return 2
            result = run(args, pid, serve_pid)
            report(args, result)
            if server is not None and any(log.errors for log in result.logs):  # (the log goes with the temp dir)
                tail = Path(tmp, "server.log").read_text(errors="replace").splitlines()[-SERVER_LOG_LINES:]
                print("\nthe server's log, last lines:\n" + "\n".join(tail))
        finally:
            if server is not None:
                stop_server(server)
    return 1 if any(log.errors for log in result.logs) else 0


if __name__ == "__main__":
    raise SystemExit(main())
