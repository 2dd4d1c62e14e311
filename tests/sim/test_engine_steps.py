"""Engine step semantics (docs/ENGINE.md#the-step-loop), checked step by step on tiny configurations.

Unless a test says otherwise: blocks of 4 tokens, 8 blocks, FCFS, recompute, chunked prefill. A request with
``prompt_len`` p and ``output_len`` n emits its first token in the step that completes its prefill and one token a
step after that, so (alone, unchunked) it runs steps a .. a+n-1 and holds ceil((p + k) / 4) blocks after emitting k+1
tokens (the last generated token is never fed back).
"""

from __future__ import annotations

import pytest

from sim import Engine, RequestStatus
from sim.engine import SimulationError
from sim.events import WaitReason
from tests.sim.factories import config, event_kinds, events_of, rec, refusal, req, run, schedule


# ---- token budget -----------------------------------------------------------------------------------------------
def test_budget_goes_to_running_requests_first_in_running_order():
    # Budget 4. A, B (prompt 2 each) fill step 0: 2 + 2 = 4, both emit a token. C (prompt 8) arrives at step 1:
    # step 1: A 1 + B 1 = 2, C gets the 2 left (partial chunk, no token)
    # step 2: A 1, B 1, C 2 (4 computed)   step 3: A 1, B 1, C 2 (6)   step 4: A 1, B 1, C 2 (8 = prompt) -> first token
    cfg = config(max_num_batched_tokens=4, num_blocks=16)
    t = run(cfg, req("A", 0, 2, 10), req("B", 0, 2, 10), req("C", 1, 8, 2))
    s = schedule(t)
    assert s[0] == [("A", 2), ("B", 2)]
    assert s[1] == [("A", 1), ("B", 1), ("C", 2)]
    assert s[2] == s[3] == s[4] == [("A", 1), ("B", 1), ("C", 2)]
    assert rec(t, "C")["first_scheduled_step"] == 1
    assert rec(t, "C")["first_token_step"] == 4


def test_a_long_prefill_takes_what_is_left_of_the_budget():
    # Budget 6. A (prompt 8) gets 6 at step 0 (partial: no token), B (prompt 8) gets nothing: budget used up.
    # step 1: A needs 2 more -> 2 (prefill done, token 1), B admitted with the 4 left (partial)
    # step 2: A decodes 1 (token 2 = its last: finishes), B gets its last 4 -> token 1
    # step 3: B decodes 1 -> token 2, finishes.
    t = run(config(max_num_batched_tokens=6, num_blocks=16), req("A", 0, 8, 2), req("B", 0, 8, 2))
    assert schedule(t) == [[("A", 6)], [("A", 2), ("B", 4)], [("A", 1), ("B", 4)], [("B", 1)]]
    assert refusal(t, 0)[0] is WaitReason.BUDGET_USED
    assert (rec(t, "A")["first_token_step"], rec(t, "A")["finish_step"]) == (1, 2)
    assert (rec(t, "B")["first_token_step"], rec(t, "B")["finish_step"]) == (2, 3)


# ---- chunked prefill --------------------------------------------------------------------------------------------
def test_chunked_prefill_lets_several_prefills_share_a_step():
    # Budget 6, three prompts of 4, 4, 2 at step 0.
    # step 0: A 4 (token), B min(4, 2) = 2 (partial, no token), C: budget 0 -> waits
    # step 1: A 1, B 2 (token), C 2 of the 3 left (prompt done -> token)
    t = run(config(max_num_batched_tokens=6), req("A", 0, 4, 3), req("B", 0, 4, 3), req("C", 0, 2, 3))
    assert schedule(t)[:2] == [[("A", 4), ("B", 2)], [("A", 1), ("B", 2), ("C", 2)]]
    assert [rec(t, x)["first_token_step"] for x in "ABC"] == [0, 1, 1]
    assert t.steps["num_output_tokens"][0] == 1  # the partial chunk of B emitted nothing


def test_without_chunked_prefill_a_prompt_over_the_remaining_budget_stops_admission():
    # Chunked prefill off: max_model_len defaults to the budget, 6, so A and B (prompt 4) answer 2 tokens at most.
    # step 0: A 4, B needs 4 > 2 left -> admission stops (C waits behind B though C's 2 tokens would fit).
    # step 1: A 1 (its 2nd token: 6 tokens, done), B 4 (5 left), C needs 2 > 1 left -> stops.
    # step 2: B 1, C 2 (4 left).
    t = run(config(max_num_batched_tokens=6, chunked_prefill=False),
            req("A", 0, 4, 2), req("B", 0, 4, 2), req("C", 0, 2, 3))
    assert schedule(t)[:3] == [[("A", 4)], [("A", 1), ("B", 4)], [("B", 1), ("C", 2)]]
    assert [rec(t, x)["first_scheduled_step"] for x in "ABC"] == [0, 1, 2]
    assert event_kinds(t, 0, "blocked") == ["B"]
    [blocked] = events_of(t, 0, "blocked")
    assert blocked.reason is WaitReason.PREFILL_OVER_BUDGET


def test_without_chunked_prefill_a_prompt_over_the_whole_budget_is_rejected():
    # Such a prompt could never be scheduled (vLLM rejects it); it must not vanish silently.
    t = run(config(max_num_batched_tokens=6, chunked_prefill=False), req("A", 0, 7, 1), req("B", 0, 6, 1))
    assert rec(t, "A")["final_status"] == "REJECTED"
    assert rec(t, "A")["finish_reason"] == "exceeds_token_budget"
    assert rec(t, "B")["final_status"] == "FINISHED_LENGTH_CAPPED"


# ---- preemption -------------------------------------------------------------------------------------------------
def _pool_of_4(**changes):
    # 4 blocks = 16 tokens, two slots.
    return config(num_blocks=4, max_num_seqs=2, **changes)


def test_fcfs_victim_is_the_last_running_request_and_goes_to_the_front():
    # A, B: prompt 4, 8 tokens out. After step k each has computed 4 + k tokens: ceil((4+k)/4) blocks.
    # Step 4 ends with 8 + 8 = 16 tokens = all 4 blocks. Step 5: A needs a 3rd block, none free ->
    # victim = last in the running list = B (2 blocks freed, A takes one; 1 free).
    # C (prompt 1, 1 token) arrived at step 1 and waits for a slot; B goes back in FRONT of C.
    # Step 6, 7: B's whole sequence is 4 + 5 generated = 9 tokens = 3 blocks > 1 free: blocked, and C (1 block
    # would fit) waits behind it. A finishes at step 7 (tokens at steps 0..7), its 3 blocks free at the end.
    # Step 8: B re-prefills 9 tokens (token 6) and C is admitted (1 block left). B: tokens 7, 8 at steps 9, 10.
    t = run(_pool_of_4(), req("A", 0, 4, 8), req("B", 0, 4, 8), req("C", 1, 1, 1))
    b, c = rec(t, "B"), rec(t, "C")
    assert b["preempted_at_steps"] == [5] and b["resumed_at_steps"] == [8]
    assert rec(t, "A")["num_preemptions"] == 0 and rec(t, "A")["finish_step"] == 7
    assert schedule(t)[5] == [("A", 1)]
    assert schedule(t)[8] == [("B", 9), ("C", 1)]
    assert b["finish_step"] == 10 and b["num_output_tokens"] == 8
    assert c["first_scheduled_step"] == 8 and c["finish_step"] == 8
    assert t.request_records()[1]["recomputed_tokens"] == 8  # B had 8 tokens of KV when preempted


def test_head_of_line_blocking_by_a_preempted_request():
    # Same run: at steps 6 and 7 the head of the queue is the preempted B (needs 3 blocks, 1 free) and C, which
    # needs 1 block, is not looked at: admission stops at the first request that cannot be admitted.
    t = run(_pool_of_4(), req("A", 0, 4, 8), req("B", 0, 4, 8), req("C", 1, 1, 1))
    for step in (6, 7):
        assert event_kinds(t, step, "blocked") == ["B"]
        assert refusal(t, step) == (WaitReason.NO_KV_BLOCKS, 3, 1)  # needs 3 blocks, 1 free
        assert int(t.steps["free_blocks_after"][step - 1]) == 1


def test_no_admission_in_a_step_that_preempted():
    # Priority policy, A and B priority 1, C priority 0 arrives at step 1 (slots full). Step 5: A needs a 3rd block;
    # victim = largest (priority, arrival) = B (tie on (1, 0) goes to the later arrival). 1 block is free after A
    # grows and C needs just 1, but nothing is admitted in a step that preempted. C is admitted at step 6.
    t = run(_pool_of_4(policy="priority"), req("A", 0, 4, 8, priority=1), req("B", 0, 4, 8, priority=1),
            req("C", 1, 1, 1, priority=0))
    assert rec(t, "B")["preempted_at_steps"] == [5]
    assert int(t.steps["free_blocks_after"][5]) == 1
    assert refusal(t, 5)[0] is WaitReason.PREEMPTED_THIS_STEP
    assert rec(t, "C")["first_scheduled_step"] == 6
    assert t.steps["num_admitted"][5] == 0


def test_a_request_can_preempt_itself_fcfs():
    # A prompt 3, B prompt 4: after step k A holds ceil((3+k)/4), B ceil((4+k)/4) blocks; the pool (4) is full from
    # step 2 on (2 + 2). Step 5: A (8 computed) needs no block, B needs a 3rd: none free, the victim is the last
    # running request = B itself. It is not scheduled this step.
    t = run(_pool_of_4(), req("A", 0, 3, 8), req("B", 0, 4, 8))
    assert rec(t, "B")["preempted_at_steps"] == [5]
    assert schedule(t)[5] == [("A", 1)]
    [preempt] = events_of(t, 5, "preempt")
    assert preempt.other_row == preempt.row  # it needed the block itself
    # A: tokens at steps 0..7 -> finishes at 7; B resumes at 8 with 4 + 5 = 9 tokens, then 2 more decode steps.
    assert rec(t, "A")["finish_step"] == 7
    assert rec(t, "B")["resumed_at_steps"] == [8] and schedule(t)[8] == [("B", 9)]
    assert rec(t, "B")["finish_step"] == 10


def test_priority_victim_is_the_lowest_priority_wherever_it_runs():
    # A (priority 2) arrives at step 0, B (priority 0) at step 1: the running list is [A, B]. After step 4 A has
    # 4 + 4 = 8 tokens, B 4 + 3 = 7: 2 + 2 blocks, the pool is full. Step 5: A needs a 3rd block; the victim is
    # max (priority, arrival) = A itself, although B is last in the list. A request that preempted itself ends the
    # running loop (as in vLLM): B is not scheduled at step 5 either.
    t = run(_pool_of_4(policy="priority"), req("A", 0, 4, 8, priority=2), req("B", 1, 4, 8, priority=0))
    assert rec(t, "A")["preempted_at_steps"] == [5]
    [preempt] = events_of(t, 5, "preempt")
    assert preempt.other_row == preempt.row  # it needed the block itself
    assert schedule(t)[5] == []
    assert rec(t, "B")["num_preemptions"] == 0
    # B: tokens at steps 1..4 and 6..9 -> finishes at 9, holding 3 blocks from step 7 on; A (4 + 5 = 9 tokens,
    # 3 blocks) waits for them and resumes at step 10 with 5 tokens, then needs 3 more: finishes at 12.
    assert rec(t, "B")["finish_step"] == 9
    assert rec(t, "A")["resumed_at_steps"] == [10]
    assert schedule(t)[10] == [("A", 9)]
    assert rec(t, "A")["finish_step"] == 12


def test_priority_victim_is_reinserted_by_priority_not_at_the_front():
    # A priority 2, B priority 0 at step 0: admitted in priority order, the running list is [B, A]. Step 5: B needs a
    # 3rd block -> victim = A (largest priority); B takes one of A's 2 blocks (1 free). C (priority 1) has waited
    # for a slot since step 1: the queue is now C (1), A (2), where FCFS would have put A at the front.
    # Step 6: C needs 1 block: admitted, finishes at once (1 token). Step 7: A (9 tokens = 3 blocks) still blocked;
    # B finishes (tokens at 0..7). Step 8: A resumes.
    t = run(_pool_of_4(policy="priority"), req("A", 0, 4, 8, priority=2), req("B", 0, 4, 8, priority=0),
            req("C", 1, 1, 1, priority=1))
    assert schedule(t)[0] == [("B", 4), ("A", 4)]
    assert rec(t, "A")["preempted_at_steps"] == [5]
    assert schedule(t)[5] == [("B", 1)]
    assert rec(t, "C")["first_scheduled_step"] == 6
    assert rec(t, "A")["resumed_at_steps"] == [8]
    # The same run under FCFS (running list [A, B], victim B at the front of the queue) blocks C until step 8.
    t_fcfs = run(_pool_of_4(), req("A", 0, 4, 8, priority=2), req("B", 0, 4, 8, priority=0),
                 req("C", 1, 1, 1, priority=1))
    assert rec(t_fcfs, "B")["preempted_at_steps"] == [5]
    assert rec(t_fcfs, "C")["first_scheduled_step"] == 8


def test_priority_ties_break_by_arrival_order_after_a_preemption():
    # vLLM orders its priority queue by (priority, arrival_time): a preempted request goes back AHEAD of a request
    # with the same priority that arrived after it. X (priority 0), A and B (priority 1, A listed first) arrive at
    # step 0; two slots: X and A run, B waits. Each holds ceil((4+k)/4) blocks after step k: 8 blocks full after
    # step 12. Step 13: X needs a 5th block -> victim max (priority, arrival) = A (preempted with 16 tokens).
    # Queue: A before B. Step 14: A needs ceil(17/4) = 5 blocks, 3 free: blocked, and B waits behind it.
    # X (20 tokens, steps 0..19) finishes at 19; step 20: A (5 blocks) and B (1 block) are admitted together.
    t = run(config(max_num_seqs=2, policy="priority"), req("X", 0, 4, 20, priority=0),
            req("A", 0, 4, 20, priority=1), req("B", 0, 4, 4, priority=1))
    assert rec(t, "A")["preempted_at_steps"] == [13]
    assert event_kinds(t, 14, "blocked") == ["A"]
    assert refusal(t, 14) == (WaitReason.NO_KV_BLOCKS, 5, 3)
    assert schedule(t)[14] == [("X", 1)]
    assert rec(t, "A")["resumed_at_steps"] == [20]
    assert rec(t, "B")["first_scheduled_step"] == 20
    assert schedule(t)[20] == [("A", 17), ("B", 4)]


# ---- admission rules --------------------------------------------------------------------------------------------
def test_admission_needs_the_whole_sequence_not_just_the_first_chunk():
    # 4 blocks, budget 4. A (prompt 4, 9 out) holds 3 blocks from step 5 on (4 + 5 = 9 tokens). B (prompt 8, 1 out)
    # arrives at step 5: its first chunk (3 tokens, 1 block) would fit in the 1 free block, but its whole prompt
    # needs 2 blocks: blocked until A finishes at step 8 (tokens at steps 0..8). Step 9: B gets 4, step 10: 4 -> token.
    t = run(config(num_blocks=4, max_num_batched_tokens=4), req("A", 0, 4, 9), req("B", 5, 8, 1))
    assert refusal(t, 5) == (WaitReason.NO_KV_BLOCKS, 2, 1)
    assert rec(t, "B")["first_scheduled_step"] == 9
    assert schedule(t)[9:11] == [[("B", 4)], [("B", 4)]]
    assert rec(t, "B")["finish_step"] == 10


def test_watermark_is_checked_only_when_something_is_running():
    # watermark 0.25 of 8 blocks = 2 blocks kept free. A (prompt 28 = 7 blocks) arrives to an idle engine: admitted
    # although it leaves 1 < 2 free. B (1 block) is next in the same step with A now running: 1 - 1 = 0 < 2 ->
    # blocked. A finishes at step 0 (1 token); B runs at step 1.
    t = run(config(watermark=0.25), req("A", 0, 28, 1), req("B", 0, 4, 1))
    assert rec(t, "A")["first_scheduled_step"] == 0
    assert rec(t, "B")["first_scheduled_step"] == 1
    assert refusal(t, 0) == (WaitReason.WATERMARK, 1, 1)  # B needs 1 of the 1 free: 0 left, below 0.25 x 8 = 2
    # Without the watermark B shares step 0 (7 + 1 = 8 blocks).
    t0 = run(config(), req("A", 0, 28, 1), req("B", 0, 4, 1))
    assert rec(t0, "B")["first_scheduled_step"] == 0


def test_max_num_seqs_caps_the_running_batch():
    # Two slots, three 1-token prompts with 3 tokens out: A, B run steps 0..2; C starts at step 3.
    t = run(config(max_num_seqs=2), req("A", 0, 1, 3), req("B", 0, 1, 3), req("C", 0, 1, 3))
    assert rec(t, "C")["first_scheduled_step"] == 3
    assert refusal(t, 0)[0] is WaitReason.NO_SLOT
    assert t.steps["num_running"].max() == 2
    one = run(config(max_num_seqs=1), req("A", 0, 1, 3), req("B", 0, 1, 3))
    assert refusal(one, 0)[0] is WaitReason.NO_SLOT


def test_blocks_freed_at_the_end_of_a_finish_step_are_reused_next_step():
    # 2 blocks. A (prompt 4, 5 out) holds ceil((4+4)/4) = 2 blocks in its finish step 4. B (prompt 8 = 2 blocks)
    # arrives at step 1 and starts at step 5, the step right after A finished.
    t = run(config(num_blocks=2), req("A", 0, 4, 5), req("B", 1, 8, 1))
    assert rec(t, "A")["finish_step"] == 4
    assert int(t.steps["used_blocks"][4]) == 2  # during A's last step
    assert int(t.steps["free_blocks_after"][4]) == 2  # freed at its end
    assert rec(t, "B")["first_scheduled_step"] == 5


def test_abort_removes_from_running_and_waiting_and_frees_blocks_at_once():
    # One slot. A (prompt 4) runs from step 0, its client leaves at step 3: A has tokens from steps 0, 1, 2 and holds
    # ceil((4+2)/4) = 2 blocks. B waits and its client leaves at step 2. C waits behind them.
    # Step 2: B aborted from the queue. Step 3: A aborted before scheduling, its 2 blocks free now: C runs at step 3.
    t = run(config(max_num_seqs=1), req("A", 0, 4, 10, abort_step=3), req("B", 0, 4, 10, abort_step=2),
            req("C", 0, 4, 2))
    a, b, c = rec(t, "A"), rec(t, "B"), rec(t, "C")
    assert (a["final_status"], a["finish_step"], a["num_output_tokens"]) == ("FINISHED_ABORTED", 3, 3)
    assert (b["final_status"], b["finish_step"], b["first_scheduled_step"]) == ("FINISHED_ABORTED", 2, None)
    assert a["finish_reason"] == b["finish_reason"] == "client_disconnected"
    assert int(t.steps["used_blocks"][2]) == 2
    assert c["first_scheduled_step"] == 3
    assert int(t.steps["used_blocks"][3]) == 1  # only C's block: A's two were freed before scheduling
    assert t.steps["num_finished"][2] == 1 and t.steps["num_finished"][3] == 1
    assert t.steps["num_waiting"][2] == 1  # only C is left in the queue


def test_idle_gaps_are_recorded_as_empty_steps():
    # A runs steps 0..1; nothing until B arrives at step 10; the idle steps 2..9 are recorded with nothing scheduled
    # and the base step time. (A single-client run with an idle gap used to crash building the trace.)
    t = run(config(), req("A", 0, 4, 2), req("B", 10, 4, 2))
    assert t.num_steps == 12
    assert schedule(t)[2:10] == [[]] * 8
    assert list(t.clients["client_blocks"][:, 0]) == [1, 2] + [0] * 8 + [1, 2]
    assert t.steps["step_ms"][5] == t.config.cost.step_base_ms
    assert rec(t, "B")["first_scheduled_step"] == 10


def test_idle_gaps_with_prefix_caching_and_two_clients():
    t = run(config(enable_prefix_caching=True), req("A", 0, 4, 2, client_id="x"), req("B", 10, 4, 2, client_id="y"))
    assert t.clients["client_blocks"].shape == (12, 2)
    assert list(t.clients["client_blocks"][:, 1]) == [0] * 10 + [1, 2]


def test_every_request_ends_with_a_status_and_a_reason():
    t = run(config(max_num_seqs=1), req("A", 0, 4, 3), req("B", 0, 40, 1), req("C", 0, 4, 3, abort_step=1))
    assert [rec(t, x)["final_status"] for x in "ABC"] == ["FINISHED_LENGTH_CAPPED", "REJECTED", "FINISHED_ABORTED"]
    assert [rec(t, x)["finish_reason"] for x in "ABC"] == ["length", "exceeds_kv_pool", "client_disconnected"]
    assert all(RequestStatus(int(s)).is_finished for s in t.requests["status"])


def test_an_idle_wait_past_max_steps_stops_at_once():
    # b arrives at step 10**9: the engine is idle from step 2 and would record a billion idle steps (gigabytes)
    # before the step guard saw them. It stops as soon as it knows.
    with pytest.raises(SimulationError, match="idle until step 1,000,000,000, past max_steps=500,000"):
        run(config(max_steps=500_000), req("a", 0, 4, 2), req("b", 10**9, 4, 2))
    # With the default max_steps (2,000,000) the trace's memory budget stops it first: ~826,000 steps of one client
    # fit the CLI's 1 GiB at ~1.3 KB a step (sim/cost_estimate.py)
    with pytest.raises(SimulationError, match="idle until step 1,000,000,000, past 825,955, .* memory budget of "
                                              "1,073,741,824 bytes"):
        run(config(), req("a", 0, 4, 2), req("b", 10**9, 4, 2))


def test_every_step_record_is_filled_by_field_name():
    # StepRecord and ClientRecord (sim/trace.py) declare the trace's per-step columns once. Every path fills them by
    # field name (sim/step_record.py): by keyword (an idle stretch's StepRecord, the per-client rows) or, on the
    # busy-step path where building the record costs ~3% of a run, as a plain tuple of locals named after the
    # fields, in field order. A column added, dropped or moved without the writer following fails here.
    import ast
    import inspect

    from sim import engine, fast_forward, step_record
    from sim.trace import ClientRecord, StepRecord

    records = {"StepRecord": StepRecord._fields, "ClientRecord": ClientRecord._fields}
    trees = [ast.parse(inspect.getsource(module)) for module in (engine, fast_forward, step_record)]
    nodes = [node for tree in trees for node in ast.walk(tree)]
    calls = [n for n in nodes if isinstance(n, ast.Call) and getattr(n.func, "id", None) in records]
    assert len(calls) >= 2  # the idle stretch's StepRecord, the per-client rows' ClientRecord
    for call in calls:
        assert not call.args and tuple(k.arg for k in call.keywords) == records[call.func.id], ast.unparse(call)
    tuples = {fields[0]: [n for n in nodes if isinstance(n, ast.Tuple) and isinstance(n.ctx, ast.Load) and n.elts
                          and getattr(n.elts[0], "id", None) == fields[0]] for fields in records.values()}
    for fields in records.values():
        [record] = tuples[fields[0]]  # the busy step's one tuple of each
        assert tuple(getattr(e, "id", None) for e in record.elts) == fields, ast.unparse(record)


# The recorders' methods that append a step's record (sim/recorder.py): per-step columns and schedule, and a sparse
# run's per-client entries.
_STEP_APPENDS = {"TraceRecorder": ("append", "append_idle", "append_block"),
                 "SparseClientRecorder": ("activity", "activity_block", "changes", "changes_block")}


def test_no_code_but_the_one_writer_appends_a_steps_record():
    # Read: in sim/, a call of a recorder's step appends is made only inside sim/step_record.py's StepWriter.write
    # (and the helpers it calls).
    import ast

    from tests.conftest import REPO_ROOT

    names = {name for methods in _STEP_APPENDS.values() for name in methods}
    callers = set()
    for path in sorted((REPO_ROOT / "sim").glob("*.py")):
        if path.name == "recorder.py":  # (where they are defined)
            continue
        tree = ast.parse(path.read_text())
        for function in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
            for call in ast.walk(function):
                if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in names
                        and ast.unparse(call.func.value).endswith(("recorder", "sparse"))):
                    callers.add((path.name, function.name))
    assert callers == {("step_record.py", "write"), ("step_record.py", "_write_sparse_clients")}, callers


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("num_clients", [1, 3])
@pytest.mark.parametrize("policy", ["fcfs", "vtc"])
def test_every_step_is_written_through_the_one_writer(monkeypatch, sparse, num_clients, policy):
    # Run: every step of a run that has busy steps, an idle stretch and quiet stretches (one client or several,
    # recorded densely or sparsely, a bulk walk or a counters walk) reaches the recorders only from inside
    # StepWriter.write, which is handed each step once.
    from sim import recorder as recorder_module
    from sim.step_record import StepWriter

    inside = []  # the write calls under way
    written = []  # the steps each write was given
    paths = {"busy_step": 0, "idle_steps": 0, "decode_steps": 0}

    def writer(original):
        def write(self, first_step, num_steps, *args):
            inside.append(first_step)
            written.extend(range(first_step, first_step + num_steps))
            try:
                return original(self, first_step, num_steps, *args)
            finally:
                inside.pop()
        return write

    def counted(name, original):
        def path(self, *args):
            paths[name] += 1
            return original(self, *args)
        return path

    def guarded(name, original):
        def append(self, *args):
            assert inside, f"{name} called outside StepWriter.write"
            return original(self, *args)
        return append

    monkeypatch.setattr(StepWriter, "write", writer(StepWriter.write))
    for name in paths:
        monkeypatch.setattr(StepWriter, name, counted(name, getattr(StepWriter, name)))
    for cls, methods in _STEP_APPENDS.items():
        for name in methods:
            monkeypatch.setattr(getattr(recorder_module, cls), name,
                                guarded(name, getattr(getattr(recorder_module, cls), name)))
    reqs = [req("a", 0, 8, 60, client_id="c0"), req("b", 2, 8, 40, client_id=f"c{1 % num_clients}"),
            req("c", 5, 8, 30, client_id=f"c{2 % num_clients}"), req("d", 300, 8, 40, client_id="c0")]
    trace = Engine(config(num_blocks=64, max_num_seqs=2, policy=policy), reqs, sparse_clients=sparse).run()
    assert written == list(range(trace.num_steps))
    assert all(paths.values()), paths  # (each path ran)
