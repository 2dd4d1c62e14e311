"""The cached runner's key: two scenarios that would run differently never share a cached trace."""

import dataclasses

import numpy as np
import pytest

from sim import presets
from ui import runner
from ui.runner import scenario_key


def test_edited_requests_of_a_generated_workload_get_their_own_key():
    # Lessons edit or reorder generated requests (the workload spec stays the same): the key must see that.
    sc = presets.get("returning_idle").scenario
    reordered = dataclasses.replace(sc, requests=tuple(reversed(sc.requests)))
    assert reordered.workload == sc.workload
    assert scenario_key(reordered) != scenario_key(sc)
    assert scenario_key(dataclasses.replace(sc)) == scenario_key(sc)
    assert scenario_key(sc.with_config(max_num_seqs=3)) != scenario_key(sc)


def test_the_key_follows_a_request_list_changed_in_place():
    sc = presets.get("article_hol").scenario
    requests = list(sc.requests)
    as_list = dataclasses.replace(sc, requests=requests)
    before = scenario_key(as_list)
    requests.reverse()
    assert scenario_key(as_list) != before


def test_equal_request_tuples_share_a_key_whichever_object_asks():
    # A cached request list comes back as a new, equal tuple each rerun: the key must not depend on the object.
    sc = presets.get("weighted_vtc").scenario
    copy = dataclasses.replace(sc, requests=tuple(list(sc.requests)))
    assert copy.requests is not sc.requests
    assert scenario_key(copy) == scenario_key(sc) == scenario_key(sc)  # the second ask is answered by the memo
    shorter = dataclasses.replace(sc, requests=sc.requests[:-1])
    assert scenario_key(shorter) != scenario_key(sc)


def test_run_variants_leaves_the_second_half_of_the_policies_to_the_worker(monkeypatch):
    # The page's thread takes queued runs from the front, a worker from the back: the second half of the policy
    # runs goes last, so the worker starts on those before the sweep queued ahead.
    from ui import lesson, runner

    queued = []
    monkeypatch.setattr(runner, "prefetch", lambda scenarios: queued.extend(sc.name for sc in scenarios))
    patient_of = {}

    def run(sc, *, patient: bool = True):
        patient_of[sc.name] = patient
        return sc.name

    monkeypatch.setattr(runner, "run", run)
    monkeypatch.setattr(runner, "summary", lambda sc, trace: {})
    monkeypatch.setattr(lesson, "unservable_message", lambda sc, trace: "")  # (the "traces" here are names)
    base = presets.get("article_hol").scenario
    def named(max_num_seqs: int, name: str):
        return dataclasses.replace(base.with_config(max_num_seqs=max_num_seqs), name=name)

    variants = [(f"v{i}", named(1 + i, f"v{i}")) for i in range(3)]
    # A sweep that repeats the last variant (as the sigma sweep repeats FCFS) must not pull it forward.
    ahead = [named(9, "sweep0"), named(3, "sweep-v2")]
    runs = lesson.run_variants(variants, ahead=ahead)
    assert queued == ["v0", "v1", "sweep0", "v2"]
    assert [r.label for r in runs] == ["v0", "v1", "v2"]  # the page still shows them in order
    # The first is the page's own to run at once; the others it waits for a worker to make (when patient).
    assert patient_of == {"v0": False, "v1": True, "v2": True}


def test_a_cached_run_is_one_read_only_trace_for_every_caller(no_prefetch_workers):
    # Shared by every session (no copy unpickled per rerun), so no caller may change what the others see.
    sc = presets.get("article_hol").scenario.with_config(max_num_seqs=2)
    first = runner.run(sc)
    assert runner.run(dataclasses.replace(sc)) is first
    with pytest.raises(ValueError, match="read-only"):
        first.steps["time_ms"][0] = 0.0
    with pytest.raises(ValueError, match="read-only"):
        first.requests["finish_step"][:] = 0
    assert np.all(first.steps["time_ms"] > 0)


def test_a_page_waits_for_a_worker_only_while_other_pages_run_in_the_process():
    import threading

    assert runner._patience_s() == 0.0  # alone: it runs a queued run itself
    release = threading.Event()
    other = threading.Thread(target=release.wait, name=runner.SCRIPT_THREAD_NAME, daemon=True)
    mine = {}
    me = threading.Thread(target=lambda: mine.setdefault("patience", runner._patience_s()),
                          name=runner.SCRIPT_THREAD_NAME)
    other.start()
    try:
        me.start()
        me.join()
    finally:
        release.set()
        other.join()
    assert mine["patience"] == runner.PATIENCE_S > 0


def test_long_lived_objects_are_frozen_at_the_first_and_the_fiftieth_page_run(monkeypatch):
    import gc
    import itertools

    frozen_at, page_run = [], [0]
    monkeypatch.setattr(runner, "_page_runs", itertools.count(1))
    monkeypatch.setattr(gc, "freeze", lambda: frozen_at.append(page_run[0]))
    monkeypatch.setattr(gc, "collect", lambda: 0)
    for page_run[0] in range(1, 121):
        runner.settle_long_lived_objects()
    assert frozen_at == [1, 50] == list(runner.FREEZE_AT_PAGE_RUNS)


def test_streamlit_runs_a_page_script_in_the_thread_runner_counts():
    # _patience_s counts Streamlit's page-script threads by name: if Streamlit renamed them, pages would silently
    # stop leaving their runs to the worker under a class.
    from streamlit.testing.v1 import AppTest

    def page():
        import threading

        import streamlit as st

        st.session_state["thread"] = threading.current_thread().name

    at = AppTest.from_function(page)
    at.run()
    assert at.session_state["thread"] == runner.SCRIPT_THREAD_NAME
