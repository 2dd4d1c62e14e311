"""One home for each refusal's words (issue 32): for the same request, every surface that says why the engine
rejects it says the sentence of ``sim.events.refusal``, each with only its own lead-in and advice.

The surfaces: a ``reject`` event (``describe``: the CLI, the CSV export, the step explanations), a scenario file's
error (``sim.admission.rejection_message`` behind ``ScenarioError``), the Workbench's cell problem
(``ui.workbench_table.never_runs``) and the lesson pages' warning (``ui.lesson.unservable_message``). The event holds
no figures of the request, so it says the same sentence without them.
"""

from __future__ import annotations

import pytest

from sim.admission import NEVER_RUNS, rejection_message, rejection_reason
from sim.config import EngineConfig
from sim.engine import simulate
from sim.events import EventKind, RejectReason, refusal
from sim.request import RequestSpec
from sim.scenario import Scenario, ScenarioError, check_requests
from ui.lesson import unservable_message
from ui.workbench_table import never_runs

FITS = RequestSpec("ok", 0, 16, 16)

# (reason, engine, a request it rejects for that reason, that request's figures in the sentence)
CASES = [
    # 8 blocks of 16 tokens; prompt 100 + answer 100 = ceil(199 / 16) = 13 blocks.
    (RejectReason.EXCEEDS_KV_POOL, EngineConfig(num_blocks=8), RequestSpec("big", 0, 100, 100),
     {"num_blocks": 13, "prompt_len": 100, "output_len": 100}),
    (RejectReason.EXCEEDS_TOKEN_BUDGET, EngineConfig(num_blocks=64, chunked_prefill=False, max_num_batched_tokens=64),
     RequestSpec("long", 0, 100, 1), {"prompt_len": 100}),
    (RejectReason.EXCEEDS_MAX_MODEL_LEN, EngineConfig(num_blocks=64, max_model_len=100), RequestSpec("long", 0, 120, 1),
     {"prompt_len": 120}),
]


@pytest.mark.parametrize(("reason", "config", "spec", "figures"), CASES, ids=[c[0].value for c in CASES])
def test_every_surface_says_the_reasons_one_sentence(reason, config, spec, figures):
    sentence = refusal(reason, config, **figures)
    assert rejection_reason(spec, config) is reason and rejection_message(spec, config) == sentence

    # a scenario file's error
    with pytest.raises(ScenarioError) as err:
        check_requests([FITS, spec], config)
    assert str(err.value) == f"requests[1] (id {spec.request_id!r}): {sentence}"

    # the Workbench's cell (plus, for the pool, how long a request may be)
    problem = never_runs(spec, config, 1)
    assert problem is not None and problem.message.startswith(f"can never run on this engine: {sentence}")

    # the lesson pages' warning
    trace = simulate(config, [FITS, spec])
    warning = unservable_message(Scenario("t", config, (FITS, spec)), trace)
    assert f"rejected on arrival**: {sentence}" in warning

    # the event: the same rule, without the request's figures (the event carries none)
    [event] = [e for e in trace.events if e.kind is EventKind.REJECT]
    assert event.reason is reason
    assert trace.describe(event) == f"rejected: {refusal(reason, config)}"


def test_every_reason_an_engine_can_never_run_has_a_case_here():
    assert {c[0] for c in CASES} == set(NEVER_RUNS)
    # The others are about when the request came, not what it asks: said only by the event (pinned in
    # tests/sim/test_events.py). A rate limit's rejections are the Fairness lesson's subject, in its own words; vLLM's
    # door caps (sim/door.py) are a lesson's subject too.
    assert set(RejectReason) - set(NEVER_RUNS) == {RejectReason.RATE_LIMITED, RejectReason.MAX_NUM_QUEUED_REQS,
                                                   RejectReason.MAX_NUM_QUEUED_TOKENS}


def test_several_requests_rejected_for_one_reason_are_said_with_the_largest_figures():
    config = EngineConfig(num_blocks=64, max_model_len=100)
    specs = (FITS, RequestSpec("a", 0, 120, 1), RequestSpec("b", 0, 150, 1))
    warning = unservable_message(Scenario("t", config, specs), simulate(config, specs))
    assert f"**: {refusal(RejectReason.EXCEEDS_MAX_MODEL_LEN, config, prompt_len=150, who='they', many=True)}. " \
        in warning


def test_a_generated_workload_that_never_fits_the_pool_is_told_which_setting_to_enlarge():
    config = EngineConfig(num_blocks=8)
    spec = RequestSpec("r0", 0, 100, 100)
    with pytest.raises(ScenarioError) as err:
        check_requests([spec], config, generated=True)
    assert str(err.value) == (f"workload: its request 'r0': {rejection_message(spec, config)}; enlarge num_blocks (or "
                              f"shorten the workload's lengths)")
    long = EngineConfig(num_blocks=64, max_model_len=50)  # (a prompt over max_model_len: no pool advice)
    with pytest.raises(ScenarioError) as err:
        check_requests([spec], long, generated=True)
    assert str(err.value) == f"workload: its request 'r0': {rejection_message(spec, long)}"
