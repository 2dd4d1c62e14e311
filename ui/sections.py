"""Page sections every lesson shares: scenario upload and downloads (the step player is ui/player.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
import streamlit as st

from sim import cost_estimate, metrics
from sim import scenario as scenario_io
from sim.admission import NEVER_RUNS
from sim.scenario import Scenario, ScenarioError
from sim.trace import Trace
from sim.untrusted import spreadsheet_cell

from .controls import arrived_from_another_page
from .wording import as_code, cut, plain

UPLOAD_PARAM = "uploaded"  # in the URL while a file is uploaded: the scenario's name (its start)
UPLOAD_PARAM_MAX_CHARS = 80
# A refused file's error, on screen: it can quote the file's own text (an unknown key, a model name, a duplicate id),
# which may be Markdown (a remote image would be fetched) or megabytes long.
UPLOAD_ERROR_MAX_CHARS = 400
# An accepted file's name and description are kept cut to these (the page shows 80 and 300 characters of them): a
# 50 MB description went into the scenario download on every rerun (~12 s a rerun on a busy 2-core server).
UPLOAD_NAME_MAX_CHARS, UPLOAD_DESCRIPTION_MAX_CHARS = 200, 2_000
# An uploaded scenario runs for at most this many engine steps here. It also holds at most the work of
# sim.cost_estimate.PAGE_LIMITS (20,000 requests, 8 M tokens, 100 clients, ~512 MiB a run): a page runs it under each
# of its policies, and one process serves every reader.
APP_MAX_STEPS = cost_estimate.PAGE_LIMITS.max_steps


def upload(page: str) -> Scenario | None:
    """A scenario file the user uploaded for this page (validated), or None to use the presets. The page shows
    the file while it is in the upload box: taking it out, a file that is not valid, or "Back to the presets"
    (which also empties the box) return to the presets."""
    state_key, seen_key, box_key = f"{page}.uploaded", f"{page}.upload_seen", f"{page}.upload_box"
    if UPLOAD_PARAM in st.query_params and state_key not in st.session_state and not st.session_state.get(seen_key):
        # A link copied while its sender had a file uploaded: the link has the settings, not the file.
        st.warning(f"This link was copied while a scenario file was uploaded ({as_code(st.query_params[UPLOAD_PARAM])}"
                   f"). A link cannot carry the file: this page shows the preset with the link's settings.",
                   icon=":material/link_off:")
        del st.query_params[UPLOAD_PARAM]
    with st.sidebar.expander("Load your own scenario", expanded=state_key in st.session_state):
        file = st.file_uploader("Scenario JSON", type=["json"], key=f"{page}.upload.{st.session_state.get(box_key, 0)}",
                                help="The same format the download button writes (see the README).")
        if file is None:
            # The reader took the file out of the box; unless the box is empty because another page ran (a visit
            # to the Workbench and back): the scenario stays, and "Back to the presets" is the way out of it.
            if st.session_state.pop(seen_key, None) and not arrived_from_another_page():
                st.session_state.pop(state_key, None)
        else:
            st.session_state[seen_key] = True
            scenario_dict, error = _parsed_once(page, file)
            if error:
                st.session_state.pop(state_key, None)
                st.error(f"That scenario is not valid: {plain(error, UPLOAD_ERROR_MAX_CHARS)}. Showing the presets.",
                         icon=":material/block:")
            else:
                st.session_state[state_key] = scenario_dict
        if state_key in st.session_state:
            st.button("Back to the presets", key=f"{page}.clear_upload", on_click=_back_to_presets, args=(page,))
            st.caption("Showing your uploaded scenario; the page's policies are compared on it. "
                       "A shared link cannot carry an uploaded file.")
            scenario = scenario_io.scenario_from_dict(st.session_state[state_key])
            # so a copied link can say what it lacks (cut: a file's name may be megabytes, a URL should not be)
            st.query_params[UPLOAD_PARAM] = scenario.name[:UPLOAD_PARAM_MAX_CHARS]
            return scenario
    if UPLOAD_PARAM in st.query_params:
        del st.query_params[UPLOAD_PARAM]
    return None


def _for_this_app(data: bytes) -> Scenario:
    """An uploaded file's scenario, runnable in a page's time and memory: within ``PAGE_LIMITS`` (requests, clients,
    tokens, arrivals before APP_MAX_STEPS, block table, memory), decided before its workload is drawn."""
    try:
        text = data.decode("utf-8-sig")  # (a byte-order mark, as some editors write, is fine)
    except UnicodeDecodeError:
        raise ScenarioError("the file is not UTF-8 text; upload a JSON scenario") from None
    scenario = scenario_io.loads(text, cost_estimate.PAGE_LIMITS)  # (refused before its workload is drawn)
    if scenario.config.max_steps > APP_MAX_STEPS:
        scenario = scenario.with_config(max_steps=APP_MAX_STEPS)
    if len(scenario.name) > UPLOAD_NAME_MAX_CHARS or len(scenario.description) > UPLOAD_DESCRIPTION_MAX_CHARS:
        scenario = dataclasses.replace(scenario, name=cut(scenario.name, UPLOAD_NAME_MAX_CHARS),
                                       description=cut(scenario.description, UPLOAD_DESCRIPTION_MAX_CHARS))
    return scenario



def _parsed_once(page: str, file: Any) -> tuple[dict | None, str]:
    """The file in the upload box as a scenario dict, or why it is not valid: parsed once per file, not on every
    rerun while it stays in the box (a large or deeply nested file took seconds each time)."""
    key = f"{page}.upload_parsed"
    memo = st.session_state.get(key)
    if memo is None or memo[0] != file.file_id:
        try:
            memo = (file.file_id, scenario_io.scenario_to_dict(_for_this_app(file.getvalue())), "")
        except ScenarioError as e:
            memo = (file.file_id, None, str(e))
        st.session_state[key] = memo
    return memo[1], memo[2]


def _back_to_presets(page: str) -> None:
    """The "Back to the presets" button: forget the file and give the page a new, empty upload box."""
    for key in (f"{page}.uploaded", f"{page}.upload_seen"):
        st.session_state.pop(key, None)
    st.session_state[f"{page}.upload_box"] = st.session_state.get(f"{page}.upload_box", 0) + 1
    if UPLOAD_PARAM in st.query_params:  # (else the next run would take the URL for a link copied during an upload)
        del st.query_params[UPLOAD_PARAM]


def downloads(scenario: Scenario, trace: Trace, name: str, key: str) -> None:
    """Download buttons: the scenario as JSON (loadable here and by ``python -m sim run``) and the trace as CSV."""
    c1, c2, c3 = st.columns(3)
    # The files are made only when a button is clicked (a callable), not on every rerun.
    c1.download_button("Scenario (JSON)", lambda: scenario_io.dumps(scenario), file_name=f"{name}.json",
                       mime="application/json", key=f"{key}.dl_json", width="stretch")
    c2.download_button("Requests (CSV)", lambda: requests_csv(scenario, trace), file_name=f"{name}-requests.csv",
                       mime="text/csv", key=f"{key}.dl_req", width="stretch")
    c3.download_button("Steps (CSV)", lambda: frame_csv(trace.to_frames()["steps"]),
                       file_name=f"{name}-steps.csv", mime="text/csv", key=f"{key}.dl_steps", width="stretch")
    if any(why in NEVER_RUNS for why in trace.finish_reason):
        st.caption(":material/warning: Some requests of this scenario can never run on this engine, so its file "
                   "will not load (here or with `python -m sim run`) until the engine fits them: enlarge the KV pool "
                   "(or the token budget) first.")


def requests_csv(scenario: Scenario, trace: Trace) -> str:
    """One row per request: what it asked for, what happened to it, and its latencies in steps and ms as the
    metrics table counts them, its time between tokens (TBT) included (blank where it never happened: a rejected
    request has no TTFT, a one-token answer no TBT), and whether it met the SLO targets. Step lists are
    space-separated numbers; steps are whole numbers even where some rows are blank."""
    requests = trace.to_frames()["requests"]
    for col in ("preempted_at_steps", "resumed_at_steps", "swapped_out_at_steps"):
        requests[col] = requests[col].map(lambda v: " ".join(map(str, v)))
    specs = scenario.requests
    requests["output_len"] = [r.output_len for r in specs]
    requests["max_tokens"] = pd.array([r.max_tokens for r in specs], dtype="Int64")
    requests["abort_step"] = pd.array([r.abort_step for r in specs], dtype="Int64")
    latencies = metrics.request_latencies(trace)
    for key, name in (("queue", "queueing_delay"), ("ttft", "ttft"), ("finish", "finish_latency")):
        requests[f"{name}_steps"] = pd.array(latencies[f"{key}_steps"], dtype="Float64").round().astype("Int64")
        requests[f"{name}_ms"] = np.round(latencies[f"{key}_ms"], 3)
    # Time between tokens beside TTFT: blank for a request with fewer than two tokens read.
    tbt = metrics.request_tbt(trace)
    requests["tbt_mean_ms"], requests["tbt_max_ms"] = np.round(tbt["mean_ms"], 3), np.round(tbt["max_ms"], 3)
    requests["tbt_max_steps"] = pd.array(tbt["max_steps"], dtype="Float64").round().astype("Int64")
    # Against the config's SLO targets (sim.metrics.request_slo: TBT's on the largest gap, tbt_max_ms)
    for key, met in metrics.request_slo(trace, latencies).items():
        requests[key] = met
    for col in ("first_scheduled_step", "first_token_step", "finish_step", "disconnect_step"):
        requests[col] = pd.array(requests[col], dtype="Int64")
    return frame_csv(requests)


def frame_csv(frame: pd.DataFrame) -> str:
    """A frame as a CSV download (every page's): its text cells (ids, clients, run labels, reasons) that a
    spreadsheet would run as a formula ("=HYPERLINK(...)", "@SUM(...)", "-2+3") start with a quote
    (``sim.untrusted.spreadsheet_cell``, OWASP's rule); number columns are written as they are."""
    out = frame.copy(deep=False)
    for col in out.columns:
        if pd.api.types.is_string_dtype(out[col]) or out[col].dtype == object:
            out[col] = out[col].map(lambda v: spreadsheet_cell(v) if isinstance(v, str) else v)
    return out.to_csv(index=False)
