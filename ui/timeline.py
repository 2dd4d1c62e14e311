"""What the step player sends to the browser, once per window of steps: for each compared run, the state at every
step of the window (the batch with each request's tokens, the waiting queue, swapped and idle requests, the KV
pool's counts and with a block map its blocks) and the decisions taken, worded by ``sim.events.describe``.

Built from the trace and ``sim.playback`` (the queues re-run), never from sentences. Lists that repeat the step
before are left out (a sparse dict by step index), so a window of quiet decode steps costs a few bytes a step.
Request ids are sent as data and written into the page as text (never as HTML or Markdown).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from sim.events import EventKind, describe
from sim.playback import JUMP_KINDS, Playback
from sim.trace import SCHED_DECODE, SCHED_PREFILL, SCHED_PREFILL_DONE, SCHED_WASTED, Trace

from . import theme
from .wording import event_label

# What a scheduled request did in a step, as the player names it (Trace.sched_kind).
SCHED_WORDS = {SCHED_PREFILL: "prefill chunk", SCHED_PREFILL_DONE: "prefill done, first token",
               SCHED_DECODE: "decode", SCHED_WASTED: "token for nobody"}
MAX_JUMP_STEPS = 5_000  # steps of the whole run to jump between (past this, the window's own)
_COUNT_COLUMNS = {"running": "num_running", "waiting": "num_waiting", "swapped": "num_swapped",
                  "used": "used_blocks", "free_after": "free_blocks_after", "prefill": "num_prefill_tokens",
                  "decode": "num_decode_reqs", "preempted": "num_preempted"}


def run_payload(label: str, trace: Trace, playback: Playback | None, first_step: int | None = None,
                end_step: int | None = None) -> dict[str, Any]:
    """One run's window as plain JSON-able data (see the module docstring). Without ``playback`` (the window
    ``first_step`` to ``end_step`` then), everything the trace holds: no queue order and no block map."""
    lo, hi = (playback.first_step, playback.end_step) if playback is not None else (first_step, end_step)
    if lo is None or hi is None:
        raise ValueError("first_step and end_step: needed when there is no playback")
    steps = trace.steps
    rows_seen: set[int] = set()
    batch = _batches(trace, lo, hi, rows_seen)
    texts: dict[str, int] = {}
    events: dict[int, list[list[int]]] = {}
    arrived: dict[int, list[int]] = {}
    swapped_after = _parked(trace, lo, hi)
    # The same decision at another step reads the same: word it once (keyed by every field but the step; a tuple
    # slice, ~10x cheaper than Event._replace on a window of 2,000 events).
    worded: dict[tuple, str] = {}
    for e in trace.events_between(lo, hi):
        i = e.step - lo
        rows_seen.add(e.row)
        if e.kind is EventKind.ARRIVE:
            arrived.setdefault(i, []).append(e.row)
            continue
        label_text = event_label(e.kind.value, swapped=e.row in swapped_after(i))
        same = e[1:]
        why = worded.get(same)
        if why is None:
            why = worded[same] = describe(e, trace.request_ids, trace.config)
        events.setdefault(i, []).append([e.row, texts.setdefault(label_text, len(texts)),
                                         texts.setdefault(why, len(texts)), _KIND_CODE[e.kind]])
    queues = {name: _sparse(getattr(playback, name), rows_seen)
              for name in ("waiting_head", "swapped", "idle_running")} if playback is not None else None
    return {
        "label": label,
        "first": lo, "end": hi, "num_steps": trace.num_steps,
        "num_blocks": trace.config.num_blocks, "block_size": trace.config.block_size,
        "start_ms": round(float(trace.start_ms(lo)), 3),  # the clock at the window's first step; then + step_ms
        "counts": {key: run_lengths(steps[col][lo:hi].astype(int)) for key, col in _COUNT_COLUMNS.items()},
        "step_ms": run_lengths(np.round(steps["step_ms"][lo:hi], 3)),
        "batch": batch,
        "queues": queues,
        "events": _repeats_marked(events),
        "arrived": {str(i): v for i, v in arrived.items()},
        "texts": list(texts),
        "jumps": _jump_steps(trace, lo, hi),
        "blocks": _blocks(playback, rows_seen) if playback is not None else None,
        "ids": {str(r): trace.request_ids[r] for r in sorted(rows_seen)},
    }


def run_lengths(values: np.ndarray) -> list[float | int]:
    """``values`` as [value, how many times, value, how many times, ...]: a count that holds for hundreds of steps
    is sent once."""
    if not len(values):
        return []
    starts = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
    lengths = np.diff(np.r_[starts, len(values)])
    return np.column_stack((values[starts], lengths)).ravel().tolist()


_KIND_CODE = {kind: i for i, kind in enumerate(EventKind)}
KIND_NAMES = [kind.value for kind in EventKind]  # the player's code -> kind (for the "jump" kinds and styling)


def _batches(trace: Trace, lo: int, hi: int, rows_seen: set[int]) -> dict[str, dict[str, list[int]]]:
    """Per step of the window: the scheduled requests as [row, tokens, kind, ...] in the scheduler's order, sent
    only where the step differs from the one before, and then as a change to it (``batch_delta``)."""
    off = trace.sched_offsets[lo : hi + 1].tolist()
    a0, b0 = off[0], off[-1]
    flat = np.column_stack((trace.sched_rows[a0:b0], trace.sched_tokens[a0:b0],
                            trace.sched_kind[a0:b0])).ravel().tolist()
    out: dict[str, dict[str, list[int]]] = {}
    before: list[int] = []
    for t in range(lo, hi):
        now = flat[3 * (off[t - lo] - a0) : 3 * (off[t - lo + 1] - a0)]
        if now != before or t == lo:
            out[str(t - lo)] = batch_delta(before, now) if t > lo else {"f": now}
            rows_seen.update(now[0::3])
        before = now
    return out


def batch_delta(before: list[int], now: list[int]) -> dict[str, list[int]]:
    """``now`` (a step's [row, tokens, kind, ...]) as a change to ``before``: rows gone ("d"), the remaining rows'
    new tokens and kinds by position ("c": [index, tokens, kind, ...]), rows appended at the end ("a": triples).
    When the rows that stayed changed order (a request that got no tokens comes back in its place), the whole
    list ("f")."""
    rows_now = now[0::3]
    rows_before = before[0::3]
    if rows_now[: len(rows_before)] == rows_before:  # (most steps: nobody left, some may have joined at the end)
        gone, kept = [], range(0, len(before), 3)
    else:
        present = set(rows_now)
        gone = [r for r in rows_before if r not in present]
        kept = [k for k in range(0, len(before), 3) if before[k] in present]
        if rows_now[: len(kept)] != [before[k] for k in kept]:
            return {"f": now}
    changed: list[int] = []
    for i, k in enumerate(kept):  # (compared field by field: no slices made for the ~30 rows of a busy batch)
        j = 3 * i
        if before[k + 1] != now[j + 1] or before[k + 2] != now[j + 2]:
            changed += (i, now[j + 1], now[j + 2])
    delta = {"d": gone, "c": changed, "a": now[3 * len(kept) :]}
    return {key: v for key, v in delta.items() if v}


def _repeats_marked(events: dict[int, list[list[int]]]) -> dict[str, Any]:
    """Each step's events as one flat list [row, label, why, kind, ...], or 0 where the step repeats the step
    before word for word (a request still refused for the same reason, step after step)."""
    out: dict[str, Any] = {}
    for i, rows in events.items():
        flat = [v for event in rows for v in event]
        out[str(i)] = 0 if events.get(i - 1) == rows else flat
    return out


def _sparse(entries: list[tuple[int, ...] | None], rows_seen: set[int]) -> dict[str, list[int]]:
    out = {}
    for i, rows in enumerate(entries):
        if rows is not None:
            out[str(i)] = list(rows)
            rows_seen.update(rows)
    return out


def _parked(trace: Trace, lo: int, hi: int):
    """``fn(i)``: the rows parked in CPU memory after step ``lo + i``, from the swap events (a swapped request that
    is refused is "not swapped back in yet", not "next in line": it is not in the waiting queue)."""
    moves = [(e.step, e.row, e.kind is EventKind.SWAP_OUT)
             for e in trace.events_of((EventKind.SWAP_OUT, EventKind.SWAP_IN, EventKind.ABORT, EventKind.FINISH))
             if e.step < hi]
    parked: set[int] = set()
    at: list[frozenset[int]] = []
    k, now = 0, frozenset()
    for step in range(lo, hi):
        changed = False
        while k < len(moves) and moves[k][0] <= step:
            _, row, out = moves[k]
            (parked.add if out else parked.discard)(row)
            k, changed = k + 1, True
        if changed:
            now = frozenset(parked)
        at.append(now)
    return at.__getitem__


def _jump_steps(trace: Trace, lo: int, hi: int) -> list[int]:
    """The steps with a decision worth stopping at (admit, preempt, swap, resume, abort, finish, reject): the
    whole run's, or the window's when there are too many."""
    steps = sorted({e.step for e in trace.events_of(JUMP_KINDS)})
    if len(steps) > MAX_JUMP_STEPS:
        steps = [s for s in steps if lo <= s < hi]
    return steps


def _blocks(playback: Playback, rows_seen: set[int]) -> dict[str, Any] | None:
    if playback.first_block_codes is None or playback.block_changes is None:
        return None
    first = playback.first_block_codes.tolist()
    rows_seen.update(c for c in first if c >= 0)
    changes = {}
    for i, moved in enumerate(playback.block_changes):
        if moved:
            changes[str(i)] = [v for pair in moved for v in pair]
            rows_seen.update(code for _, code in moved if code >= 0)
    return {"first": first, "changes": changes}


def payload_frame(unit: str, default_step: int) -> dict[str, Any]:
    """What the player needs besides the runs: the step to start on when the link names none, the time unit of the
    page's charts, the words for the kinds of events and scheduled work, the block map's colours."""
    return {
        "default_step": default_step, "unit": unit,
        "kinds": KIND_NAMES, "sched_words": {str(k): v for k, v in SCHED_WORDS.items()},
        "palette": {"free": theme.WHITE, "cached": theme.LIGHT_GREY, "freed": "#F4C7B8",
                    "requests": list(theme.REQUEST_COLORS)},  # a request's colour: its row mod this many
    }


def earliest(firsts: Sequence[tuple[int | None, int | None, int | None]]) -> int:
    """Where a player starts, from each run's ``first_decisions``: the first preemption in any run, else the first
    refusal to admit, else the first admission (else step 0)."""
    for i in range(3):
        found = [f[i] for f in firsts if f[i] is not None]
        if found:
            return min(found)
    return 0


def first_decisions(trace: Trace) -> tuple[int | None, int | None, int | None]:
    """The run's first preemption (or swap-out), first refusal to admit and first admission: steps, or None.
    A pure function of the trace (a page caches it per run)."""
    return (trace.first_step_of((EventKind.PREEMPT, EventKind.SWAP_OUT)), trace.first_step_of((EventKind.BLOCKED,)),
            trace.first_step_of((EventKind.ADMIT,)))
