"""vLLM V1's rules for the free-queue order, the watermark and max_model_len (issue 18), by hand on tiny pools.

Blocks of 4 tokens (the factories' pool: 8 blocks unless a test says otherwise). vLLM's sources: ``BlockPool.
free_blocks`` (a freed block without a hash is prepended to the free queue, one with a hash appended),
``KVCacheManager.__init__`` (``watermark_blocks = int(watermark * num_blocks)`` over the whole pool, the reserved
null block included), ``SchedulerConfig.verify_max_model_len`` and ``check_stop`` (max_model_len).
"""

from __future__ import annotations

import pytest

from sim import Engine, EngineConfig, ModelSpec, StepLimitError
from sim.config import MODELS
from sim.events import RejectReason, WaitReason
from tests.sim.factories import config, event_kinds, events_of, rec, refusal, req, run, schedule


def _blocks_at(cfg: EngineConfig, requests: list, step: int, request_id: str) -> list[int]:
    """The block ids ``request_id`` holds after ``step``, in token order."""
    engine = Engine(cfg, requests, check_invariants=True)
    engine.advance(until_step=step)
    return engine.kv.blocks_of(engine.table.ids.index(request_id)).tolist()


# ---- rule 1: which freed block is handed out first --------------------------------------------------------------
@pytest.mark.parametrize(("enable_prefix_caching", "blocks_of_b"), [(False, [2, 1]), (True, [2, 3])])
def test_a_new_request_gets_the_blocks_freed_without_a_hash_first(enable_prefix_caching, blocks_of_b):
    # A (prompt 10, group g with an 8-token prefix, 1 token) holds blocks 0, 1, 2 at step 0 and finishes; they are
    # freed tail first: 2, 1, 0. Block 2 (tokens 8-9) is partial, so never hashed.
    # Caching off: no block has a hash, all three go to the head in that order: queue [2 1 0 3 4 5 6 7].
    # Caching on: blocks 0 and 1 hold the group's hashes and go to the tail: queue [2 3 4 5 6 7 1 0].
    # B (prompt 8, no group) at step 1 needs ceil(8 / 4) = 2 blocks from the head.
    requests = [req("A", 0, 10, 1, prefix_group="g", prefix_len=8), req("B", 1, 8, 2)]
    cfg = config(enable_prefix_caching=enable_prefix_caching)
    assert _blocks_at(cfg, requests, 1, "B") == blocks_of_b


def test_a_partial_block_freed_last_is_reused_first_so_a_cached_prefix_survives():
    # step 0: A (prompt 10, group g, prefix 8) takes blocks 0 1 2 and finishes: queue [2 | 3 4 5 6 7 | 1 0], blocks
    #   0 and 1 cached (the group's two blocks), 2 partial.
    # step 1: C (prompt 6) takes 2 and 3 from the head: block 2 gets C's full block 0 (hashed), 3 its partial block
    #   (tokens 4-5). C finishes, freed tail first: 3 to the head, 2 to the tail: queue [3 4 5 6 7 1 0 2].
    # step 2: D (prompt 20) takes 5 blocks from the head, [3 4 5 6 7]: both group blocks stay cached.
    #   (Appending every freed block, the queue was [4 5 6 7 2 1 0 3] and D took 1, a group block.)
    # step 3: B (prompt 10, group g) hits both group blocks (8 tokens) and computes only 10 - 8 = 2.
    t = run(config(enable_prefix_caching=True), req("A", 0, 10, 1, prefix_group="g", prefix_len=8),
            req("C", 1, 6, 1), req("D", 2, 20, 1), req("B", 3, 10, 1, prefix_group="g", prefix_len=8))
    assert rec(t, "B")["cached_tokens"] == 8
    assert schedule(t)[3] == [("B", 2)]


# ---- rule 2: the watermark counts the whole pool, the null block too -----------------------------------------------
@pytest.mark.parametrize(("num_blocks", "b_blocks", "b_starts"), [
    # watermark 0.1. A (prompt 4, 4 tokens) holds 2 blocks at step 1 (its 5th token opens a 2nd block) and finishes
    # at step 3. B arrives at step 1 needing b_blocks (prompt 4 * b_blocks, 1 token); it starts at step 1 if it
    # leaves at least the watermark free, else at step 4, when nothing runs (no watermark then).
    (8, 6, 1),  # int(0.1 * 9) = 0: 8 - 2 - 6 = 0 >= 0
    (9, 6, 1),  # int(0.1 * 10) = 1: 9 - 2 - 6 = 1 >= 1
    (9, 7, 4),  # 9 - 2 - 7 = 0 < 1 (int(0.1 * 9) = 0 would admit it)
    (19, 15, 1),  # int(0.1 * 20) = 2: 19 - 2 - 15 = 2 >= 2
    (19, 16, 4),  # 19 - 2 - 16 = 1 < 2 (int(0.1 * 19) = 1 would admit it)
    (59, 51, 1),  # int(0.1 * 60) = 6: 59 - 2 - 51 = 6 >= 6 (the pool of the vLLM fixture watermark_rounding)
    (59, 52, 4),  # 59 - 2 - 52 = 5 < 6 (int(0.1 * 59) = 5 would admit it)
])
def test_admission_at_the_watermark_boundary(num_blocks, b_blocks, b_starts):
    t = run(config(num_blocks=num_blocks, watermark=0.1, max_num_batched_tokens=256),
            req("A", 0, 4, 4), req("B", 1, 4 * b_blocks, 1))
    assert rec(t, "A")["finish_step"] == 3
    assert rec(t, "B")["first_scheduled_step"] == b_starts


def test_the_watermark_in_blocks_is_rounded_down_over_num_blocks_plus_one():
    # vLLM: int(watermark * (usable blocks + the null block)).
    assert config(num_blocks=59, watermark=0.1).watermark_blocks == 6  # int(0.1 * 60); int(0.1 * 59) would be 5
    assert config(num_blocks=8, watermark=0.25).watermark_blocks == 2  # int(0.25 * 9) = int(2.25)
    assert config(num_blocks=7, watermark=0.25).watermark_blocks == 2  # int(0.25 * 8); int(0.25 * 7) would be 1


def test_a_watermark_near_1_admits_only_into_an_idle_engine():
    # vLLM accepts any watermark in [0, 1). 0.99 keeps int(0.99 * 9) = 8 blocks, the whole pool, free: nothing is
    # admitted while anything runs, so A, B, C (4 tokens of prompt, 3 of answer: steps 0-2 each) run one at a time.
    cfg = config(watermark=0.99)
    t = run(cfg, req("A", 0, 4, 3), req("B", 0, 4, 3), req("C", 0, 4, 3))
    assert [rec(t, x)["first_scheduled_step"] for x in "ABC"] == [0, 3, 6]
    # B needs 1 block; with A's 1 held, 8 - 1 - 1 = 6 would be left, below the 8 kept
    assert refusal(t, 0) == (WaitReason.WATERMARK, 1, 7)  # needs 1 of 7 free: 6 left, below the 8 kept
    assert t.config.watermark_blocks == 8
    # A run that cannot finish in max_steps says so (the events above say why it is slow).
    with pytest.raises(StepLimitError, match=r"max_steps=5 steps with 2 of 3 requests unfinished; raise max_steps"):
        run(cfg.replace(max_steps=5), req("A", 0, 4, 3), req("B", 0, 4, 3), req("C", 0, 4, 3))


@pytest.mark.parametrize("watermark", [1.0, 1.5, -0.1])
def test_a_watermark_outside_0_to_1_is_refused(watermark):
    with pytest.raises(ValueError, match=r"watermark: must be >= 0.0 and < 1.0"):
        config(watermark=watermark)


# ---- rule 3: max_model_len ---------------------------------------------------------------------------------------
def test_a_request_stops_at_max_model_len():
    # max_model_len 10: A (prompt 6, answer of 8) stops once it holds 10 tokens, after 10 - 6 = 4 generated
    # (steps 0-3), length capped.
    t = run(config(max_model_len=10), req("A", 0, 6, 8))
    a = rec(t, "A")
    assert (a["num_output_tokens"], a["finish_step"]) == (4, 3)
    assert (a["final_status"], a["finish_reason"]) == ("FINISHED_LENGTH_CAPPED", "length")


@pytest.mark.parametrize(("output_len", "num_output", "reason"), [
    (3, 3, "stop"),  # the stop token (3rd) comes before the 10 - 6 = 4 tokens allowed
    (4, 4, "stop"),  # on the 4th, the last allowed: vLLM's check_stop looks for the stop token first
    (5, 4, "length"),  # after it: cut at 4
])
def test_a_stop_token_wins_only_up_to_max_model_len(output_len, num_output, reason):
    t = run(config(max_model_len=10), req("A", 0, 6, output_len, max_tokens=50))
    assert (rec(t, "A")["num_output_tokens"], rec(t, "A")["finish_reason"]) == (num_output, reason)


def test_a_prompt_of_max_model_len_still_gets_its_first_token():
    # vLLM checks after each token: a prompt of exactly 8 = max_model_len tokens generates 1, then stops.
    t = run(config(max_model_len=8), req("A", 0, 8, 5))
    assert (rec(t, "A")["num_output_tokens"], rec(t, "A")["finish_reason"]) == (1, "length")


def test_a_prompt_over_max_model_len_is_rejected_on_arrival():
    # vLLM refuses a prompt longer than max_model_len (8): A (9) is rejected at step 0, B (8) runs.
    t = run(config(max_model_len=8), req("A", 0, 9, 1), req("B", 0, 8, 1))
    assert (rec(t, "A")["final_status"], rec(t, "A")["finish_reason"]) == ("REJECTED", "exceeds_max_model_len")
    assert event_kinds(t, 0, "reject") == ["A"]
    assert [e.reason for e in events_of(t, 0, "reject")] == [RejectReason.EXCEEDS_MAX_MODEL_LEN]
    assert rec(t, "B")["final_status"] == "FINISHED_LENGTH_CAPPED"


def test_max_model_len_defaults_to_the_model_context_or_the_budget_without_chunked_prefill():
    assert config().effective_max_model_len == 131_072  # Llama 3.1 8B's context
    assert config(model=MODELS["qwen2.5-7b"]).effective_max_model_len == 32_768
    # vLLM requires max_model_len <= max_num_batched_tokens without chunked prefill: the default is then the budget
    assert config(chunked_prefill=False, max_num_batched_tokens=64).effective_max_model_len == 64
    assert config(max_model_len=50).effective_max_model_len == 50


def test_without_chunked_prefill_answers_stop_at_the_budget_so_a_re_prefill_fits_one_step():
    # 3 blocks (12 tokens), budget 8, no chunking: max_model_len defaults to 8, so A and B (prompt 4, answers of 10)
    # stop after 8 - 4 = 4 tokens. step 0: A 4, B 4 (1 block each). step 1: A's 5th token opens a 2nd block (the
    # last free one); B's cannot: B, last in the running list, preempts itself. A finishes at step 3 (4 tokens),
    # freeing its 2 blocks; step 4: B re-prefills its 4 + 1 = 5 tokens in one step, within the budget of 8.
    t = run(config(num_blocks=3, max_num_seqs=2, max_num_batched_tokens=8, chunked_prefill=False),
            req("A", 0, 4, 10), req("B", 0, 4, 10))
    assert (rec(t, "A")["num_output_tokens"], rec(t, "A")["finish_step"]) == (4, 3)
    b = rec(t, "B")
    assert (b["preempted_at_steps"], b["resumed_at_steps"]) == ([1], [4])
    assert schedule(t)[4] == [("B", 5)]
    assert (b["num_output_tokens"], b["finish_reason"]) == (4, "length")


@pytest.mark.parametrize(("changes", "message"), [
    ({"chunked_prefill": False, "max_num_batched_tokens": 64, "max_model_len": 100},
     r"max_model_len: must be at most max_num_batched_tokens \(64\) when chunked_prefill is off, got 100"),
    ({"model": MODELS["mistral-7b"], "max_model_len": 40_000},
     r"max_model_len: must be at most 32,768, the context length of Mistral 7B \(model.max_position_embeddings\)"),
    ({"model": ModelSpec("Tiny", 2, 2, 64, 1, max_position_embeddings=16), "max_model_len": 17},
     r"max_model_len: must be at most 16, the context length of Tiny"),
    ({"max_model_len": -1}, r"max_model_len: must be between 0 and 10000000, got -1"),
])
def test_a_config_vllm_refuses_at_start_up_is_refused(changes, message):
    with pytest.raises(ValueError, match=message):
        config(**changes)
