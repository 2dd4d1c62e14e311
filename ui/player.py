"""The step player on every lesson: play, pause, step by 1 and by 10, jump between decisions, a speed, the step
number; the step explained for each compared run (batch, queues, KV pool, decisions); one cursor on every chart
whose figure was shown with ``cursor_runs``.

The browser animates from data sent once per window of steps (``ui/timeline.py``, ``sim/playback.py``): a
fragment reruns only when the player pauses (to put the step in the URL, so a copied link opens on the same
moment) or leaves its window (to fetch the next one). The component's code is ``ui/player.js`` and
``ui/player.css``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import streamlit as st

from sim.playback import MAX_WINDOW_STEPS, record_window, window_around
from sim.scenario import Scenario
from sim.trace import Trace
from sim.untrusted import whole_number

from . import runner, timeline
from .controls import set_param
from .wording import as_code

_HERE = Path(__file__).parent
_COMPONENT = st.components.v2.component(
    "scheduler_lab.step_player", css=(_HERE / "player.css").read_text(), js=(_HERE / "player.js").read_text())

STEP_PARAM = "step"  # the URL's step: a copied link opens the player there
# Steps a window holds before the player has been in view (then it asks for the detail, in windows of
# sim.playback.MAX_WINDOW_STEPS): the start step explained and the charts' cursor need a few steps, and most slider
# moves come from a reader looking elsewhere (a tenth of the work: ~15 ms less per run of a Fairness rerun).
PREVIEW_WINDOW_STEPS = 100


@st.cache_resource(max_entries=64, show_spinner=False)
def _window(key: str, label: str, _scenario: Scenario, _trace: Trace, first: int, end: int, block_map: bool,
            detail: bool) -> bytes:
    playback = record_window(_scenario.config, _scenario.requests, first, end, block_map=block_map) if detail \
        else None
    return _json(timeline.run_payload(label, _trace, playback, first, end))


def _json(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


def window_payload(label: str, scenario: Scenario, trace: Trace, step: int, block_map: bool,
                   detail: bool = True) -> tuple[int, int, bytes]:
    """One run's data for the window of steps around ``step``: (first step, end step, the JSON the browser gets),
    cached per run and window for every session. ``detail``: with the queues' order and the block map, which
    re-run the scenario (the rest comes from its trace), in a full window; without, a preview window."""
    first, end = window_around(min(step, trace.num_steps - 1), trace.num_steps,
                               MAX_WINDOW_STEPS if detail else PREVIEW_WINDOW_STEPS)
    key = runner.scenario_key(scenario)
    payload = _window(key, label, scenario, trace, first, end, block_map, detail)
    runner.charge_cache(_window, (key, label, None, None, first, end, block_map, detail), len(payload))
    return first, end, payload


def component_data(frame: dict[str, Any], windows: Sequence[tuple[int, int, bytes]]) -> bytes:
    """The component's data as JSON bytes: ``frame`` with ``runs`` the windows' JSON, joined without decoding them.
    Streamlit sends bytes as they are and names the element by their hash: a dict would be encoded twice on every
    rerun (once sorted, for the element's identity), ~15% of a cached Fairness rerun for a payload this size."""
    return b'{"runs":[' + b",".join(w[2] for w in windows) + b"]," + _json(frame)[1:]


def linked_step(last_step: int) -> tuple[int | None, str]:
    """The step the URL asks for (None if none) and a warning if its value is not a step of these runs."""
    raw = st.query_params.get(STEP_PARAM)
    if raw is None:
        return None, ""
    try:
        step = whole_number(raw, 0, 10**18)
    except ValueError:
        return None, (f"The link's step {as_code(raw, 30)} was ignored: it must be a whole number from 0 to "
                      f"{last_step:,}.")
    if step > last_step:
        return last_step, (f"The link's step {step:,} is past the end of these runs (step {last_step:,}); showing "
                           f"the last step.")
    return step, ""


def show(runs: Sequence[Any], page: str, unit: str, *, scope: str = "", block_map: bool = False,
         start_step: Callable[[Trace], int] | None = None, container: Any = None) -> None:
    """The player for ``runs`` (each with ``label``, ``scenario``, ``trace``), all driven by one step. ``unit``:
    the time unit of the page's charts (their cursor's x). ``scope``: the preset (or upload) whose settings these
    are: another one starts the player afresh, at ``start_step(first run's trace)`` (default: the first
    preemption, refusal or admission). ``block_map``: draw each run's KV pool, block by block. ``container``: where
    to draw it (default: here)."""
    traces = [run.trace for run in runs]
    last_step = max(t.num_steps for t in traces) - 1
    if start_step is None:
        default = timeline.earliest([runner.measure(run.scenario, timeline.first_decisions, trace=run.trace)
                                     for run in runs])
    else:
        default = start_step(traces[0])
    default = min(default, last_step)
    ident = hashlib.sha256("|".join(f"{run.label}={runner.scenario_key(run.scenario)}" for run in runs)
                           .encode()).hexdigest()[:16]
    key = f"{page}.player.{hashlib.sha256(scope.encode()).hexdigest()[:12]}"
    scope_key = f"{page}.player_scope"
    if st.session_state.get(scope_key, scope) != scope:  # another preset: its own start, not the last one's step
        set_param(STEP_PARAM, None)
    st.session_state[scope_key] = scope
    linked, warning = linked_step(last_step)
    box = st.container() if container is None else container
    if warning:
        box.warning(warning, icon=":material/warning:")

    @st.fragment
    def _player() -> None:
        held = st.session_state.get(key)
        committed = held.get("step") if isinstance(held, dict) or hasattr(held, "get") else None
        # The queues' order and the block map re-run every compared scenario: only once the player has been in
        # view (the browser asks, naming these runs), not for every slider move of a student looking elsewhere.
        detail = (held.get("detail") if isinstance(held, dict) or hasattr(held, "get") else None) == ident
        # (-1 until the reader moves the player: its start alone writes nothing into the link, where a rerun of
        # this fragment could race a slider's rerun and put back a link without the slider's new value)
        moved = isinstance(committed, int) and 0 <= committed <= last_step
        step = committed if moved else linked if linked is not None else default
        if moved and str(step) != st.query_params.get(STEP_PARAM):
            set_param(STEP_PARAM, str(step))  # the step the player paused on, for a copied link
        with st.spinner("Preparing the step player: re-running the steps around this one…", show_time=True):
            windows = [window_payload(run.label, run.scenario, run.trace, step, block_map, detail) for run in runs]
        spans = "|".join(f"{first}-{end}" for first, end, _ in windows)
        frame = {**timeline.payload_frame(unit, default), "runs_id": ident, "detail": detail, "block_map": block_map,
                 "id": f"{ident}#{spans}#{int(detail)}"}
        _COMPONENT(key=key, data=component_data(frame, windows), default={"step": -1, "detail": ""},
                   on_step_change=_noop, on_detail_change=_noop, height="content")

    with box:
        _player()


def _noop() -> None:  # (a state the component sets must have a callback to be kept)
    pass
