"""Page sections every lesson shares: scenario upload and downloads, and the step inspector.

The inspector lets a class walk through a schedule: pick a step and see who ran with how many tokens, the queues
after the step (in admission order), and why each admission, preemption or refusal happened (the trace's events).
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st

from sim import scenario as scenario_io
from sim.scenario import Scenario, ScenarioError
from sim.trace import SCHED_DECODE, SCHED_PREFILL, SCHED_PREFILL_DONE, SCHED_WASTED, Trace

from . import runner
from .page import table_height
from .wording import count, event_line

_KIND_TEXT = {SCHED_PREFILL: "prefill chunk (no token yet)", SCHED_PREFILL_DONE: "prefill done, first/next token",
              SCHED_DECODE: "decode 1 token", SCHED_WASTED: "token for nobody (wasted)"}


def upload(page: str) -> Scenario | None:
    """A scenario file the user uploaded for this page (validated), or None to use the presets."""
    state_key = f"{page}.uploaded"
    with st.sidebar.expander("Load your own scenario", expanded=state_key in st.session_state):
        file = st.file_uploader("Scenario JSON", type=["json"], key=f"{page}.upload",
                                help="The same format the download button writes (see the README).")
        if file is not None:
            try:
                text = file.getvalue().decode("utf-8")
                st.session_state[state_key] = scenario_io.scenario_to_dict(scenario_io.loads(text))
            except UnicodeDecodeError:
                st.error("That file is not UTF-8 text; upload a JSON scenario.", icon=":material/block:")
            except ScenarioError as e:
                st.error(f"That scenario is not valid: {e}", icon=":material/block:")
        if state_key in st.session_state:
            if st.button("Back to the presets", key=f"{page}.clear_upload"):
                del st.session_state[state_key]
                st.rerun()
            st.caption("Showing your uploaded scenario; the page's policies are compared on it. "
                       "A shared link cannot carry an uploaded file.")
            return scenario_io.scenario_from_dict(st.session_state[state_key])
    return None


def downloads(scenario: Scenario, trace: Trace, name: str, key: str) -> None:
    """Download buttons: the scenario as JSON (loadable here and by ``python -m sim run``) and the trace as CSV."""
    c1, c2, c3 = st.columns(3)
    # The files are made only when a button is clicked (a callable), not on every rerun.
    c1.download_button("Scenario (JSON)", lambda: scenario_io.dumps(scenario), file_name=f"{name}.json",
                       mime="application/json", key=f"{key}.dl_json", width="stretch")
    c2.download_button("Requests (CSV)", lambda: requests_csv(trace), file_name=f"{name}-requests.csv",
                       mime="text/csv", key=f"{key}.dl_req", width="stretch")
    c3.download_button("Steps (CSV)", lambda: trace.to_frames()["steps"].to_csv(index=False),
                       file_name=f"{name}-steps.csv", mime="text/csv", key=f"{key}.dl_steps", width="stretch")


def requests_csv(trace: Trace) -> str:
    """One row per request; step lists as space-separated numbers."""
    requests = trace.to_frames()["requests"]
    for col in ("preempted_at_steps", "resumed_at_steps", "swapped_out_at_steps"):
        requests[col] = requests[col].map(lambda v: " ".join(map(str, v)))
    return requests.to_csv(index=False)


def step_inspector(runs: dict[str, tuple[Scenario, Trace]], page: str,
                   start_step: Callable[[Trace], int] | None = None, scope: str = "") -> None:
    """Walk a schedule step by step (a fragment: moving its slider reruns only this section). The slider starts
    at ``start_step(trace)`` (default: the first preemption, else the first refusal to admit, else the first
    admission); a new ``scope`` (another preset) starts it there again."""

    @st.fragment
    def _inspector() -> None:
        labels = list(runs)
        label = st.selectbox("Policy", labels, key=f"{page}.inspect_label") if len(labels) > 1 else labels[0]
        scenario, trace = runs[label]
        last = trace.num_steps - 1
        if last <= 0:
            st.caption("The whole run is one engine step, step 0.")
            _show_step(scenario, trace, 0)
            return
        key = f"{page}.inspect_step.{scope}.{label}"
        if key not in st.session_state or st.session_state[key] > last:
            st.session_state[key] = min((start_step or _interesting_step)(trace), last)
        step = st.slider("Engine step", 0, last, key=key, help="Drag to walk through the schedule.")
        _show_step(scenario, trace, step)

    _inspector()


def _interesting_step(trace: Trace) -> int:
    """The first step with a preemption, else the first with a refusal to admit, else the first admission (else
    step 0)."""
    for kinds in (("preempt", "swap_out"), ("blocked",), ("admit",)):
        for step, kind, _, _ in trace.events:
            if kind in kinds:
                return step
    return 0


def _show_step(scenario: Scenario, trace: Trace, step: int) -> None:
    s, num_blocks = trace.steps, trace.config.num_blocks
    t0, t1 = float(trace.start_ms(step)), float(trace.end_ms(step))
    swap_ms = float(s["swap_ms"][step])
    swapping = f", {swap_ms:.2f} ms of it copying KV blocks between GPU and CPU" if swap_ms else ""
    st.markdown(f"**Step {step:,}** (from {t0:,.1f} ms to {t1:,.1f} ms, {t1 - t0:.2f} ms long{swapping}): "
                f"{count(int(s['num_scheduled'][step]), 'request')} computed "
                f"{count(int(s['num_prefill_tokens'][step]), 'prefill token')} and "
                f"{count(int(s['num_decode_reqs'][step]), 'decode token')}; "
                f"{int(s['used_blocks'][step]):,} of {count(num_blocks, 'KV block')} in use during the step, "
                f"{num_blocks - int(s['free_blocks_after'][step]):,} after it.")
    queues = runner.queues_at(scenario, step)
    lo, hi = trace.sched_offsets[step], trace.sched_offsets[step + 1]
    ids = [trace.request_ids[r] for r in trace.sched_rows[lo:hi]]
    # Running requests the step gave no tokens: the budget ran out, or scheduling stopped at a preemption.
    idle = [rid for rid in queues["running"] if rid not in set(ids)]
    why_idle = ("no tokens: scheduling stopped at a preemption" if s["num_preempted"][step]
                else "no tokens: the step's token budget ran out")
    scheduled = pd.DataFrame({
        "request": ids + idle,
        "tokens": [*trace.sched_tokens[lo:hi].tolist(), *[0] * len(idle)],
        "what": [_KIND_TEXT[int(k)] for k in trace.sched_kind[lo:hi]] + [why_idle] * len(idle),
    })
    events = [e for e in trace.events_at(step) if e[1] != "arrive"]
    left, right = st.columns(2)
    with left:
        st.markdown("**Running batch this step** (running-list order)")
        if len(scheduled):
            st.dataframe(scheduled, hide_index=True, height=table_height(len(scheduled), 320))
        else:
            st.caption("Nothing ran this step." if events or queues["waiting"] or queues["swapped"] else
                       "Nothing ran: the engine was idle.")
    with right:
        st.markdown("**Waiting queue after the step** (admission order, head first)")
        waiting = queues["waiting"]
        st.write(", ".join(waiting[:40]) + (f" … and {len(waiting) - 40} more" if len(waiting) > 40 else "")
                 if waiting else "empty")
        if queues["swapped"]:
            st.markdown("**Swapped to CPU:** " + ", ".join(queues["swapped"]))
    arrivals = [trace.request_ids[e[2]] for e in trace.events_at(step) if e[1] == "arrive"]
    st.markdown("**Why** (the scheduler's decisions this step)")
    swapped = set(queues["swapped"])
    lines = [f"- {event_line(trace.request_ids[row], kind, why, swapped=trace.request_ids[row] in swapped)}"
             for _, kind, row, why in events]
    if arrivals:
        lines.insert(0, f"- arrived: {', '.join(arrivals)}")
    if not lines:
        lines = ["- Nothing changed: everybody kept running." if len(scheduled) else
                 "- Nothing to decide: no request was waiting or running."]
    st.markdown("\n".join(lines))
