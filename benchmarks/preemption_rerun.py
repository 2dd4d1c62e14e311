"""Server-side rerun time of the Preemption page after a slider change, per preset, measured with AppTest.

    .venv/bin/python benchmarks/preemption_rerun.py

For each preset: open the page (first run, not timed against the target), then move the max_num_seqs slider
down one and back up (each a fresh simulation: nothing cached for that setting yet), then move it to the first
value again (cached). Target: a slider change reruns in under 300 ms.
"""

from __future__ import annotations

import logging
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from streamlit.testing.v1 import AppTest  # noqa: E402

from sim import presets  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
TARGET_MS = 300.0
KEY = "preemption.engine.max_num_seqs"


def timed_run(at: AppTest) -> float:
    t0 = time.perf_counter()
    at.run()
    ms = (time.perf_counter() - t0) * 1e3
    if at.exception:
        raise SystemExit(f"exception: {at.exception[0].value}")
    return ms


def main() -> int:
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    worst = 0.0
    print(f"{'preset':<20} {'first run':>10} {'slider -1':>10} {'slider +1':>10} {'cached':>8}")
    for preset in presets.presets_for("preemption"):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.switch_page("pages/4_Preemption.py")
        at.query_params["preset"] = preset.key
        first = timed_run(at)
        seqs = at.slider(key=KEY).value
        at.slider(key=KEY).set_value(seqs - 1)
        down = timed_run(at)
        at.slider(key=KEY).set_value(seqs + 1)
        up = timed_run(at)
        at.slider(key=KEY).set_value(seqs - 1)
        cached = timed_run(at)
        worst = max(worst, down, up)
        print(f"{preset.key:<20} {first:>8.0f} ms {down:>7.0f} ms {up:>7.0f} ms {cached:>5.0f} ms")
    print(f"worst slider rerun: {worst:.0f} ms (target < {TARGET_MS:.0f} ms): {'ok' if worst < TARGET_MS else 'OVER'}")
    return 0 if worst < TARGET_MS else 1


if __name__ == "__main__":
    raise SystemExit(main())
