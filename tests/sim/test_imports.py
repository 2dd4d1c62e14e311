"""``import sim`` stays pure: no streamlit, plotly or pandas (docs/ARCHITECTURE.md). Checked in a fresh interpreter,
since this test process may have imported them already."""

from __future__ import annotations

import subprocess
import sys

from tests.sim.factories import REPO_ROOT

CHECK = (
    "import sys, sim, sim.__main__, sim.bench, sim.fairness_metrics, sim.metrics, sim.preemption_metrics, sim.presets, "
    "sim.scenario, sim.workload; "
    "print(' '.join(m for m in ('streamlit', 'plotly', 'pandas') if m in sys.modules))"
)


def test_import_sim_pulls_in_no_ui_or_dataframe_library():
    done = subprocess.run([sys.executable, "-c", CHECK], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == ""


def test_the_check_would_see_an_import():
    # Guard against a check that cannot fail: pandas imported by Trace.to_frames() shows up.
    code = CHECK.replace("print(", "sim.presets.get('article_hol'); "
                                   "sim.simulate(sim.EngineConfig(num_blocks=4), [sim.RequestSpec('a', 0, 1, 1)])"
                                   ".to_frames(); print(")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "pandas"


def test_a_command_line_run_imports_neither_pathlib_nor_numpy_ma():
    # A cold `python -m sim run` pays for every import: pathlib (with urllib.parse, ~3 ms) and numpy.ma (~7 ms,
    # which np.percentile's first call imports through np.unique) are not needed. The np.percentile call after the
    # run shows that the check sees numpy.ma when it is there.
    code = ("import sys, numpy, sim.__main__; sim.__main__.main(['run', 'scenarios/article_hol.json']); "
            "seen = lambda: ' '.join(m for m in ('pathlib', 'numpy.ma') if m in sys.modules); "
            "sys.stderr.write(f'[{seen()}]'); numpy.percentile([1.0, 2.0], 50); sys.stderr.write(f'[{seen()}]')")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert '"summary": {' in done.stdout  # (the run happened)
    assert done.stderr == "[][numpy.ma]"
