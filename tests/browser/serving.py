"""deploy/serve.sh started for a test: nginx and N replicas on loopback, stopped at the end.

Without nginx (Debian's package) a test that starts it skips on a developer's machine and fails in CI, as a missing
Chromium does.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.browser.conftest import REPO_ROOT, _free_loopback_port, _is_healthy, _log_tail, _unavailable

NGINX = os.environ.get("NGINX", "/usr/sbin/nginx")
SERVE = REPO_ROOT / "deploy" / "serve.sh"
START_TIMEOUT_S = 120
STOP_TIMEOUT_S = 30


@dataclass
class Served:
    base_url: str
    process: subprocess.Popen
    log_path: Path

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def replica_ports(self) -> list[int]:
        """The replicas' ports, replica 1 first (serve.sh's first line)."""
        found = re.search(r"replica\(s\) on 127\.0\.0\.1 ports ([\d ]+)\)", self.output())
        return [int(p) for p in found.group(1).split()]

    def run_dir(self) -> Path:
        return Path(re.search(r"run directory (\S+);", self.output()).group(1))

    def wait_for_output(self, pattern: str, timeout_s: float) -> re.Match:
        """The first match of the regex ``pattern`` in serve.sh's output, waiting for it up to timeout_s."""
        deadline = time.monotonic() + timeout_s
        while not (found := re.search(pattern, self.output())):
            if time.monotonic() > deadline:
                raise AssertionError(f"serve.sh did not say {pattern!r} within {timeout_s:g} s (exit code "
                                     f"{self.process.poll()}):\n{_log_tail(self.log_path)}")
            time.sleep(0.2)
        return found


def is_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@contextmanager
def serve(tmp_path: Path, replicas: int) -> Iterator[Served]:
    """deploy/serve.sh --replicas N on a free loopback port, once it serves; SIGTERM at the end if still running."""
    if not os.access(NGINX, os.X_OK):
        _unavailable(f"nginx not found at {NGINX}: install Debian's with "
                     "`apt-get install -y --no-install-recommends nginx` or set NGINX")
    port = _free_loopback_port()
    base_url = f"http://127.0.0.1:{port}"
    log_path = tmp_path / "serve.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(["bash", str(SERVE), "--replicas", str(replicas), "--port", str(port),
                                    "--listen", "127.0.0.1"], cwd=REPO_ROOT, stdin=subprocess.DEVNULL,
                                   stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHON": sys.executable})
    served = Served(base_url, process, log_path)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while "Ctrl-C stops everything" not in served.output() or not _is_healthy(base_url):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"deploy/serve.sh did not serve {base_url} (exit code {process.poll()}):\n"
                            f"{_log_tail(log_path)}", pytrace=False)
            time.sleep(0.5)
        yield served
    finally:
        if process.poll() is None:  # (a test stops it itself; this is for a test that failed before)
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=STOP_TIMEOUT_S)
