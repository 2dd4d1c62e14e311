"""What the Cancellation lesson measures from its runs: the article's abandoned-request story (``Story``,
``abandon_story``, its cards), KV memory in MB and blocks, the KV held for nobody, the users who timed out, and the
waiting of the users who stayed under every server (compared over the same users).

Units: KV memory in decimal MB (1 MB = 10^6 B) of the model's KV bytes per token (131,072 B for Llama 3.1 8B,
so 1,000 tokens = 131 MB); block-granular figures count whole blocks of ``block_size`` tokens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from lessons.run import Run
from sim import metrics
from sim.config import EngineConfig, cdiv
from sim.request import NO_STEP, RequestStatus
from sim.trace import Trace
from ui.wording import Card, count, safe_id

MB = 1e6  # bytes; decimal, as the article counts


def mb(tokens: float, config: EngineConfig) -> float:
    """KV memory of ``tokens`` tokens, decimal MB."""
    return tokens * config.model.kv_bytes_per_token / MB


def blocks_for(tokens: int, config: EngineConfig) -> int:
    return cdiv(int(tokens), config.block_size)


def is_prompt_abort(config: EngineConfig) -> bool:
    return config.abort_on_disconnect and config.disconnect_detect_delay_steps == 0


@dataclass(frozen=True)
class Story:
    """The article's example measured on two runs of the same requests: one server aborts at once, one never.
    ``request_id`` is the request whose user leaves; ``waiter_id`` the other request whose start moved most."""

    request_id: str
    tokens_read: int  # tokens generated before the user left
    abort_step: int  # the step the server aborted it (the first step after the user's last token)
    freed_kv_tokens: int  # KV it held when aborted
    freed_blocks: int
    wasted_tokens: int  # without an abort: generated after the user left
    wasted_gpu_ms: float  # the no-abort run's GPU time on tokens nobody read
    end_kv_tokens: int  # without an abort: its KV at its last step
    end_blocks: int
    config: EngineConfig
    waiter_id: str | None = None
    waiter_start_abort: int = NO_STEP
    waiter_start_no_abort: int = NO_STEP

    @property
    def earlier_steps(self) -> int:
        return self.waiter_start_no_abort - self.waiter_start_abort


def abandon_story(runs: list[Run]) -> Story | None:
    """The article's numbers, when exactly one request's user leaves by choice and both an abort-at-once server and
    a no-abort server ran (None otherwise, e.g. for a workload of many users)."""
    aborting = next((r for r in runs if is_prompt_abort(r.scenario.config)), None)
    keeping = next((r for r in runs if not r.scenario.config.abort_on_disconnect), None)
    if aborting is None or keeping is None:
        return None
    leavers = [i for i, spec in enumerate(aborting.scenario.requests) if spec.abort_step is not None]
    if len(leavers) != 1:
        return None
    row = leavers[0]
    a, k = aborting.trace.requests, keeping.trace.requests
    if RequestStatus(int(a["status"][row])) != RequestStatus.FINISHED_ABORTED or k["disconnect_step"][row] == NO_STEP:
        return None  # the answer was done (or rejected) before the user left: nothing to tell
    cfg = aborting.scenario.config
    freed = int(a["num_computed_tokens"][row])
    end = int(k["num_computed_tokens"][row])
    waiter = _most_delayed(aborting.trace, keeping.trace, exclude=row)
    return Story(
        request_id=aborting.trace.request_ids[row], tokens_read=int(a["num_output_tokens"][row]),
        abort_step=int(a["finish_step"][row]), freed_kv_tokens=freed, freed_blocks=blocks_for(freed, cfg),
        wasted_tokens=int(k["num_wasted_tokens"][row]), wasted_gpu_ms=float(keeping.summary["wasted_gpu_ms"]),
        end_kv_tokens=end, end_blocks=blocks_for(end, cfg), config=cfg,
        waiter_id=None if waiter is None else aborting.trace.request_ids[waiter],
        waiter_start_abort=NO_STEP if waiter is None else int(a["first_scheduled_step"][waiter]),
        waiter_start_no_abort=NO_STEP if waiter is None else int(k["first_scheduled_step"][waiter]),
    )


def _most_delayed(aborting: Trace, keeping: Trace, exclude: int) -> int | None:
    """The request (other than ``exclude``) that started latest without an abort, relative to with one."""
    a, k = aborting.requests["first_scheduled_step"], keeping.requests["first_scheduled_step"]
    # Only users who stayed to the end under both servers: starting sooner helps nobody who then gives up.
    stayed = (aborting.requests["disconnect_step"] == NO_STEP) & (keeping.requests["disconnect_step"] == NO_STEP)
    moved = np.where((a != NO_STEP) & (k != NO_STEP) & stayed, k - a, -1)
    moved[exclude] = -1
    if not len(moved) or moved.max() <= 0:
        return None
    return int(np.argmax(moved))


def story_metrics(story: Story) -> list[Card]:
    """The article's headline numbers, measured."""
    cfg = story.config
    out = [
        Card("Generated for nobody, no abort", f"{story.wasted_tokens:,} tokens",
         f"{story.wasted_gpu_ms:,.0f} ms of GPU time on tokens nobody reads"),
        Card("Its KV at the end, no abort", f"{mb(story.end_kv_tokens, cfg):,.0f} MB",
         f"{story.end_kv_tokens:,} tokens x {cfg.model.kv_bytes_per_token:,} B; {count(story.end_blocks, 'block')} = "
         f"{story.end_blocks * cfg.block_bytes / MB:,.0f} MB allocated"),
        Card(f"Freed by the abort at step {story.abort_step:,}", f"{mb(story.freed_kv_tokens, cfg):,.0f} MB",
         f"{story.freed_kv_tokens:,} tokens; {count(story.freed_blocks, 'block')} = "
         f"{story.freed_blocks * cfg.block_bytes / MB:,.0f} MB allocated, back in the pool on the very next step "
         f"after the user's last token (step {story.abort_step - 1:,})"),
    ]
    if story.waiter_id is not None:
        out.append(Card(f"'{safe_id(story.waiter_id)}' starts sooner by", f"{story.earlier_steps:,} steps",
                    f"at step {story.waiter_start_abort:,} with the abort, step {story.waiter_start_no_abort:,} "
                    f"without"))
    return out


def peak_kv_for_nobody(trace: Trace) -> tuple[float, int]:
    """(tokens, step) at the step when the most KV was held for nobody: by requests whose user left, plus by
    requests generating past the end of their answer."""
    held = trace.steps["orphan_kv_tokens"] + metrics.past_end_kv_tokens(trace)
    if not len(held):
        return 0.0, 0
    step = int(np.argmax(held))
    return float(held[step]), step


def timed_out(run: Run) -> np.ndarray:
    """[requests] bool: the user gave up at the client timeout (not by closing the tab earlier)."""
    timeout = run.scenario.config.timeout_steps
    r = run.trace.requests
    if not timeout:
        return np.zeros(run.trace.num_requests, dtype=bool)
    deadline = r["arrival_step"] + timeout
    left_earlier = np.array([s.abort_step is not None and s.abort_step <= s.arrival_step + timeout
                             for s in run.scenario.requests])
    return (r["disconnect_step"] == deadline) & ~left_earlier


def anyone_left(runs: list[Run]) -> bool:
    """Did any user of these runs leave (close the tab, time out) before the answer was done?"""
    return any((run.trace.requests["disconnect_step"] != NO_STEP).any() for run in runs)


def stayed_under_every_server(runs: list[Run]) -> np.ndarray | None:
    """[requests] bool: the users who stayed to the end under every one of ``runs`` (None if the runs do not share
    a workload). Waiting times are compared over these: with a client timeout, who gives up depends on the server,
    and the survivors of a slow server are the lucky ones (each run's own average would flatter it)."""
    if len({run.trace.num_requests for run in runs}) != 1:
        return None
    return np.logical_and.reduce([metrics.served_mask(run.trace) for run in runs])


def waiting_of_the_same_users(runs: list[Run]) -> dict[str, dict[str, Any]]:
    """Per server, the queueing delay statistics (``queue_steps``, ``queue_ms``) and ``num_served`` of the users
    who stayed to the end under every server, as the waiting chart takes them (each run's own if no pairing)."""
    stayed = stayed_under_every_server(runs)
    return {run.label: run.summary for run in runs} if stayed is None else waiting_of(runs, stayed)


def waiting_of(runs: list[Run], stayed: np.ndarray) -> dict[str, dict[str, Any]]:
    """waiting_of_the_same_users over the users ``stayed`` marks."""
    out = {}
    for run in runs:
        lat = metrics.request_latencies(run.trace)
        out[run.label] = {"queue_steps": metrics.stats(lat["queue_steps"][stayed]),
                          "queue_ms": metrics.stats(lat["queue_ms"][stayed]), "num_served": int(stayed.sum())}
    return out
