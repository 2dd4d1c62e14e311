"""Loading a scenario file on a lesson page, and what the page hands back: the upload box's life cycle, links copied
during an upload, file names, the requests CSV."""

from __future__ import annotations

import io
import json
import re

import pandas as pd

from sim import presets
from sim.config import EngineConfig
from sim.engine import simulate
from sim.request import RequestSpec
from sim.scenario import Scenario, dumps
from tests.app.conftest import as_read, metric_values, open_page
from ui import sections
from ui.wording import file_slug

PAGE = "pages/1_Queueing.py"
ARTICLE = {"FCFS: average finish": "1,100 steps", "SJF (true lengths): average finish": "500 steps"}
# The article's requests with three slots: everybody runs at once, so both policies finish at 400 on average.
THREE_SLOTS = dumps(presets.get("article_hol").scenario.with_config(max_num_seqs=3)).encode()
THREE_SLOTS_RESULT = {"FCFS: average finish": "400 steps", "SJF (true lengths): average finish": "400 steps"}


def _box(at, n: int = 0):
    return at.file_uploader(key=f"queueing.upload.{n}")


def test_the_page_shows_the_file_only_while_it_is_in_the_box():
    at = open_page(PAGE)
    assert metric_values(at) == ARTICLE
    _box(at).set_value(("three.json", THREE_SLOTS, "application/json")).run()
    assert metric_values(at) == THREE_SLOTS_RESULT
    assert any("Your scenario: Head-of-line blocking" in c.value for c in at.caption)  # the file's own name
    _box(at).set_value(("bad.json", b"[1]", "application/json")).run()  # a bad file replaces it
    assert [as_read(e.value) for e in at.error] == [
        "That scenario is not valid: scenario: must be a JSON object, got a list. Showing the presets."]
    assert metric_values(at) == ARTICLE
    _box(at).set_value(("three.json", THREE_SLOTS, "application/json")).run()
    assert metric_values(at) == THREE_SLOTS_RESULT
    _box(at).set_value(None).run()  # the reader takes the file out
    assert metric_values(at) == ARTICLE and not at.error


def test_back_to_the_presets_also_empties_the_box():
    at = open_page(PAGE)
    _box(at).set_value(("three.json", THREE_SLOTS, "application/json")).run()
    assert at.query_params["uploaded"] == "Head-of-line blocking: one slot, 1,000/100/100 steps"
    at.button(key="queueing.clear_upload").click().run()
    assert metric_values(at) == ARTICLE
    assert _box(at, 1).value is None and "uploaded" not in at.query_params
    assert not at.warning  # not taken for a link copied during an upload


def test_a_file_with_a_byte_order_mark_loads_and_one_too_long_for_the_app_is_refused():
    at = open_page(PAGE)
    _box(at).set_value(("bom.json", b"\xef\xbb\xbf" + THREE_SLOTS, "application/json")).run()
    assert metric_values(at) == THREE_SLOTS_RESULT
    far = presets.get("article_hol").scenario
    far = far.__class__(far.name, far.config.replace(max_steps=10**7),
                        tuple(r.__class__(r.request_id, 5 * 10**6, r.prompt_len, r.output_len) for r in far.requests))
    _box(at).set_value(("far.json", dumps(far).encode(), "application/json")).run()
    (error,) = [as_read(e.value) for e in at.error]
    assert "its requests arrive until step 5,000,000, and this app simulates at most 200,000 steps a run" in error


def test_a_link_copied_during_an_upload_says_it_has_no_file():
    at = open_page(PAGE, {"uploaded": "my scenario", "max_num_seqs": "3"})
    (warning,) = [w.value for w in at.warning]
    assert "This link was copied while a scenario file was uploaded (`my scenario`)" in warning
    assert "uploaded" not in at.query_params and at.slider(key="queueing.engine.max_num_seqs").value == 3


def test_file_names_work_on_every_system():
    assert file_slug("scheduler-lab", "fairness", "weighted_vtc", "VTC 1:2 (weights A 1 : B 3)") == \
        "scheduler-lab-fairness-weighted_vtc-VTC_1-2_weights_A_1-B_3"
    assert file_slug("scheduler-lab-queueing", "SJF, no guard") == "scheduler-lab-queueing-SJF_no_guard"
    # A chart's camera button names the page and the preset (the same chart exists on several pages and presets).
    at = open_page("pages/2_Fairness.py", {"preset": "weighted_vtc"})
    files = [json.loads(c.proto.config)["toImageButtonOptions"]["filename"] for c in at.get("plotly_chart")]
    assert "scheduler-lab-fairness-weighted_vtc-counters" in files
    assert "scheduler-lab-fairness-weighted_vtc-gantt-VTC_1-2" in files
    assert all(f.startswith("scheduler-lab-fairness-weighted_vtc-") for f in files)


def test_the_requests_csv_has_latencies_in_steps_and_ms_and_whole_step_numbers():
    p = presets.get("impatient_users")
    sc = p.scenario.with_config(**p.variants[2][1])  # no abort: some users leave, their requests still finish
    trace = simulate(sc.config, sc.requests)
    frame = pd.read_csv(io.StringIO(sections.requests_csv(sc, trace)))
    assert len(frame) == len(sc.requests)
    for col in ("output_len", "max_tokens", "abort_step", "queueing_delay_steps", "queueing_delay_ms", "ttft_steps",
                "ttft_ms", "finish_latency_steps", "finish_latency_ms"):
        assert col in frame.columns
    assert frame["finish_step"].dtype.kind == "i"  # never "114.0"
    r0 = frame.iloc[0]
    assert (r0["arrival_step"], r0["finish_step"], r0["finish_latency_steps"], r0["ttft_steps"]) == (7, 114, 108, 1)
    left = frame[frame["abort_step"].notna()]
    assert len(left) and (left["abort_step"] == left["disconnect_step"]).all()


def test_the_requests_csv_has_each_requests_time_between_tokens():
    # The Token budget lesson's worked example without chunking: the 8,000-token prefill is one step of
    # 5.75 + 8,000 x 0.016 + 8 x 0.006 = 133.798 ms, every chat's longest gap (one step); "long" itself decodes
    # in steps of 5.75 + 9 x 0.006 = 5.804 ms until the chats end.
    p = presets.get("long_prompt")
    sc = p.scenario.with_config(**dict(p.variants)["no chunking"])
    frame = pd.read_csv(io.StringIO(sections.requests_csv(sc, simulate(sc.config, sc.requests)))).set_index("id")
    chats = frame.loc[[f"chat{i}" for i in range(8)]]
    assert (chats["tbt_max_ms"] == 133.798).all() and (chats["tbt_max_steps"] == 1).all()
    assert (chats["tbt_mean_ms"] < 133.798).all()
    assert frame.loc["long", "tbt_max_ms"] == 5.804 and frame.loc["long", "ttft_ms"] == 133.798
    one = pd.read_csv(io.StringIO(sections.requests_csv(*_one_token())))
    assert one["tbt_max_ms"].isna().all() and one["tbt_max_steps"].isna().all()  # one token: no gap


def _one_token():
    sc = Scenario("one token", EngineConfig(num_blocks=8, block_size=4, max_num_seqs=2),
                  (RequestSpec("r0", 0, 4, 1),))
    return sc, simulate(sc.config, sc.requests)


def test_a_whole_number_where_a_float_setting_goes_loads_like_its_float():
    # "rate_per_step": 3 (not 3.0) above the arrival-rate slider's maximum: the slider is widened to show it, and
    # its bounds stay floats (an int maximum beside a float minimum was an exception box).
    data = {"name": "int rate", "config": {"num_blocks": 2000, "max_num_seqs": 8},
            "workload": {"num_requests": 50, "rate_per_step": 3, "seed": 1}}
    at = open_page(PAGE)
    _box(at).set_value(("int.json", json.dumps(data).encode(), "application/json")).run()
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    rate = next(s for s in at.slider if s.key.endswith("rate"))
    assert rate.value == 3.0 and rate.max >= 3.0


def test_a_file_with_more_work_than_a_page_can_serve_is_refused():
    # One process serves every reader: 200,000 requests of 2,000-token answers grew it to 24 GB before it was killed.
    too_many = {"config": {"num_blocks": 1_000_000}, "workload": {"num_requests": 20_001, "rate_per_step": 2.0}}
    too_long = {"config": {"num_blocks": 1_000_000, "max_num_seqs": 1024},
                "workload": {"num_requests": 5000, "rate_per_step": 2.0, "output_median": 2000,
                             "output_max": 2000, "output_sigma": 0.0}}
    at = open_page(PAGE)
    _box(at).set_value(("many.json", json.dumps(too_many).encode(), "application/json")).run()
    (error,) = [as_read(e.value) for e in at.error]
    assert "it has 20,001 requests, and this app runs at most 20,000; run it with `python -m sim run FILE`" in error
    assert metric_values(at) == ARTICLE  # back on the presets
    _box(at).set_value(("long.json", json.dumps(too_long).encode(), "application/json")).run()
    (error,) = [as_read(e.value) for e in at.error]
    assert "and this app runs at most 8,000,000 a scenario; run it with `python -m sim run FILE` instead" in error


def test_text_from_a_link_is_shown_as_code_not_markdown():
    # A crafted link must not put a live link or formatting in the app's own warnings, nor a 3,000-character value.
    evil = "[log in again](https://evil.example)"
    at = open_page(PAGE, {"uploaded": evil, "preset": evil + "x" * 3000, "max_num_seqs": evil})
    text = " ".join(w.value for w in at.warning)
    assert f"(`{evil}`)" in text  # the upload's name
    assert f"The link's preset `{evil}{'x' * 44}…` does not exist on this page" in text  # cut at 80 characters
    assert f"The link's setting `max_num_seqs={evil}` was ignored" in text
    assert "](" not in re.sub(r"`[^`]*`", "", text)  # no Markdown link outside code


def test_a_run_past_the_step_guard_gets_advice_for_the_app_not_for_the_file():
    # max_steps is no setting on the pages: the engine's "raise max_steps" is replaced by what a reader can change.
    def app():
        from sim import EngineConfig, RequestSpec, simulate
        from ui import page

        page.guarded(lambda: simulate(EngineConfig(num_blocks=100, max_num_seqs=1, max_steps=50),
                                      [RequestSpec("a", 0, 4, 40), RequestSpec("b", 0, 4, 40)]))

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(app).run()
    (error,) = [e.value for e in at.error]
    assert error.startswith("**The simulation cannot finish:** it stopped after 50 engine steps with 1 of 2 requests "
                            "unfinished. Give the engine less to do")
    assert "raise max_steps" not in error and "`python -m sim run`" in error


def test_a_file_in_the_box_is_parsed_once_not_on_every_rerun(monkeypatch):
    # A rejected file left in the box (or a good one) used to be parsed again on every rerun: seconds each for a
    # large, deeply nested one.
    calls = []
    real = sections._for_this_app
    monkeypatch.setattr(sections, "_for_this_app", lambda data: calls.append(len(data)) or real(data))
    at = open_page(PAGE)
    _box(at).set_value(("bad.json", b"[1]", "application/json")).run()
    at.run()
    at.run()
    assert len(calls) == 1 and len(at.error) == 1  # still said, on every rerun
    _box(at).set_value(("three.json", THREE_SLOTS, "application/json")).run()
    at.run()
    assert len(calls) == 2 and metric_values(at) == THREE_SLOTS_RESULT


def test_a_long_scenario_name_is_not_copied_whole_into_the_link():
    long_name = json.loads(THREE_SLOTS)
    long_name["name"] = "x" * 100_000
    at = open_page(PAGE)
    _box(at).set_value(("long.json", json.dumps(long_name).encode(), "application/json")).run()
    assert metric_values(at) == THREE_SLOTS_RESULT
    assert at.query_params["uploaded"] == "x" * sections.UPLOAD_PARAM_MAX_CHARS


def test_a_refused_files_own_text_in_the_error_is_plain_and_cut():
    # The error quotes the file (an unknown key, a model name, a duplicate id): a Markdown image there was drawn,
    # fetched from its host, and a key of megabytes was a message of megabytes on every rerun.
    image = "![pixel](https://evil.example/p.png)"
    data = json.loads(THREE_SLOTS)
    data["config"][image] = 1
    at = open_page(PAGE)
    _box(at).set_value(("image.json", json.dumps(data).encode(), "application/json")).run()
    (error,) = [e.value for e in at.error]
    assert "![" not in error and "](" not in error  # the Markdown source: escaped, so no image is drawn
    assert as_read(error).startswith(f"That scenario is not valid: config: unknown key '{image}'; allowed keys: ")
    data = json.loads(THREE_SLOTS)
    data["requests"][1]["id"] = data["requests"][0]["id"] = "x" * 1_000_000
    _box(at).set_value(("long.json", json.dumps(data).encode(), "application/json")).run()
    (error,) = [as_read(e.value) for e in at.error]
    said = f"requests[1].id: duplicate request id '{'x' * 1_000_000}'; ids must be unique"
    assert error == f"That scenario is not valid: {said[:sections.UPLOAD_ERROR_MAX_CHARS]}…. Showing the presets."


def test_a_huge_name_and_description_are_kept_cut():
    # A 50 MB description went into the scenario download on every rerun (~12 s a rerun): the page keeps what it
    # can show, and the run is the file's.
    data = json.loads(THREE_SLOTS)
    data["name"], data["description"] = "n" * 1_000_000, "d" * 3_000_000
    at = open_page(PAGE)
    _box(at).set_value(("huge.json", json.dumps(data).encode(), "application/json")).run()
    assert metric_values(at) == THREE_SLOTS_RESULT
    kept = at.session_state["queueing.uploaded"]
    assert kept["name"] == "n" * sections.UPLOAD_NAME_MAX_CHARS + "…"
    assert kept["description"] == "d" * sections.UPLOAD_DESCRIPTION_MAX_CHARS + "…"
    (caption,) = [c.value for c in at.caption if c.value.startswith("**Your scenario")]
    assert len(caption) < 1_000
