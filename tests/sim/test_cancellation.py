"""Cancellation and stops: abort on disconnect (or not), late detection, client timeouts, stop checks, max_tokens.

A request alone with prompt 4 emits token k+1 at step k and, after step k, holds KV for 4 + k tokens.
"""

from __future__ import annotations

import pytest

from sim import metrics
from tests.sim.factories import config, rec, req, run


def test_abort_on_disconnect_stops_generation_at_once():
    t = run(config(), req("A", 0, 4, 6, abort_step=2))
    a = rec(t, "A")
    # Tokens at steps 0, 1; aborted at the start of step 2.
    assert (a["final_status"], a["finish_step"], a["num_output_tokens"], a["wasted_tokens"]) == (
        "FINISHED_ABORTED", 2, 2, 0)
    assert a["finish_reason"] == "client_disconnected" and a["disconnect_step"] == 2


def test_without_abort_the_engine_generates_for_nobody():
    t = run(config(abort_on_disconnect=False), req("A", 0, 4, 6, abort_step=2))
    a = rec(t, "A")
    # All 6 tokens (steps 0..5); those of steps 2..5 are wasted: 4.
    assert (a["final_status"], a["finish_step"], a["num_output_tokens"], a["wasted_tokens"]) == (
        "FINISHED_LENGTH_CAPPED", 5, 6, 4)
    assert a["disconnect_step"] == 2
    assert t.steps["num_wasted_tokens"].tolist() == [0, 0, 1, 1, 1, 1]
    # The orphan's KV after each step: 4 + k tokens from step 2 on (6, 7, 8, 9), in ceil(/4) blocks.
    assert t.steps["orphan_kv_tokens"].tolist() == [0, 0, 6, 7, 8, 9]
    assert t.steps["orphan_blocks"].tolist() == [0, 0, 2, 2, 2, 3]
    s = metrics.summary(t)
    assert (s["num_served"], s["num_finished"], s["wasted_tokens"], s["useful_tokens"]) == (0, 1, 4, 2)


def test_a_late_detection_wastes_the_tokens_of_the_delay():
    # Client leaves at step 2, the server notices 2 steps later: tokens of steps 2 and 3 are wasted, abort at 4.
    t = run(config(disconnect_detect_delay_steps=2), req("A", 0, 4, 10, abort_step=2))
    a = rec(t, "A")
    assert (a["final_status"], a["finish_step"], a["num_output_tokens"], a["wasted_tokens"]) == (
        "FINISHED_ABORTED", 4, 4, 2)
    assert a["disconnect_step"] == 2


def test_a_request_that_finishes_before_the_abort_is_noticed_is_not_served():
    # 3 tokens at steps 0..2; the client left at step 1, noticed at 1 + 5: the request finished first, nobody read it.
    t = run(config(disconnect_detect_delay_steps=5), req("A", 0, 4, 3, abort_step=1))
    a = rec(t, "A")
    assert (a["final_status"], a["finish_step"], a["wasted_tokens"]) == ("FINISHED_LENGTH_CAPPED", 2, 2)
    assert metrics.summary(t)["num_served"] == 0


def test_timeout_aborts_running_and_waiting_requests():
    # One slot, timeout 5 steps: A runs steps 0..4 and is aborted at step 5 with 5 tokens; B and C, waiting since
    # step 0, are aborted at step 5 too, never scheduled. D arrives at step 3: times out at 8 (it ran 5..7).
    t = run(config(max_num_seqs=1, timeout_steps=5), req("A", 0, 4, 10), req("B", 0, 4, 10), req("C", 0, 4, 10),
            req("D", 3, 4, 10))
    for x, (finish, tokens, started) in {"A": (5, 5, 0), "B": (5, 0, None), "C": (5, 0, None),
                                         "D": (8, 3, 5)}.items():
        r = rec(t, x)
        assert (r["final_status"], r["finish_reason"]) == ("FINISHED_ABORTED", "timeout"), x
        assert (r["finish_step"], r["num_output_tokens"], r["first_scheduled_step"]) == (finish, tokens, started), x


def test_timeout_leaves_requests_that_finish_in_time():
    t = run(config(timeout_steps=5), req("A", 0, 4, 5))  # steps 0..4: done before step 5
    assert rec(t, "A")["final_status"] == "FINISHED_LENGTH_CAPPED"


@pytest.mark.parametrize(
    ("output_len", "max_tokens", "stop", "stop_check", "tokens", "status", "reason", "wasted"),
    [
        # Stop token at token 3 of a max_tokens=10 answer: checked every step -> stops at 3.
        (3, 10, "token", "every_step", 3, "FINISHED_STOPPED", "stop", 0),
        # A server that stops only at max_tokens generates 10, the 7 past the stop are wasted.
        (3, 10, "token", "at_max_tokens", 10, "FINISHED_LENGTH_CAPPED", "length", 7),
        # A stop string is matched on text after the step: caught one token late (4 tokens, 1 wasted).
        (3, 10, "string", "every_step", 4, "FINISHED_STOPPED", "stop", 1),
        (3, 10, "string", "at_max_tokens", 10, "FINISHED_LENGTH_CAPPED", "length", 7),
        # The stop string's extra token cannot pass max_tokens: 3 + 1 = 4 = max_tokens.
        (3, 4, "string", "every_step", 4, "FINISHED_STOPPED", "stop", 1),
        # max_tokens below the natural length cuts the answer: 4 tokens, all read.
        (10, 4, "token", "every_step", 4, "FINISHED_LENGTH_CAPPED", "length", 0),
        # No max_tokens: the limit is output_len itself.
        (3, None, "token", "every_step", 3, "FINISHED_LENGTH_CAPPED", "length", 0),
    ],
)
def test_stop_checks_and_max_tokens(output_len, max_tokens, stop, stop_check, tokens, status, reason, wasted):
    t = run(config(stop_check=stop_check), req("A", 0, 4, output_len, max_tokens=max_tokens, stop_type=stop))
    a = rec(t, "A")
    assert (a["num_output_tokens"], a["final_status"], a["finish_reason"], a["wasted_tokens"]) == (
        tokens, status, reason, wasted)
    assert a["finish_step"] == tokens - 1  # one token a step from step 0
