"""The Cancellation lesson's logic: its knobs, the server variants it compares on one workload, the article's
abandoned-request story measured from the runs, and the "what to notice" sentences. No Streamlit calls here, so it
is testable on its own.

Units: KV memory in decimal MB (1 MB = 10^6 B) of the model's KV bytes per token (131,072 B for Llama 3.1 8B,
so 1,000 tokens = 131 MB); block-granular figures count whole blocks of ``block_size`` tokens.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lessons.run import Run
from sim import metrics
from sim.config import EngineConfig, StopCheck, cdiv, field_help
from sim.events import EventKind
from sim.presets import Preset
from sim.request import NO_STEP, RequestSpec, RequestStatus, StopType
from sim.scenario import Scenario
from sim.trace import Trace
from sim.workload import ABANDON_POINTS, WorkloadSpec
from ui.controls import Knob
from ui.glossary import term_link
from ui.wording import Card, count, join_and, pct_change, safe_id

LESSON = "cancellation"
QUESTION = (  # (a glossary term linked at its first use)
    f"A user who closes the tab mid-answer (unless the server can {term_link('abort')}), or an answer that has "
    f"already {term_link('stop check', 'reached its end')}, can leave the server generating tokens that nobody will "
    f"ever read. How much GPU time and {term_link('KV cache', 'KV memory')} does that waste, and how long do the "
    "users who stay wait because of it?"
)
MB = 1e6  # bytes; decimal, as the article counts
# When a leaving user gives up, as a fraction of its answer's length in steps from arrival (queueing included, so
# a "late" user may still read nothing).
ABANDON_POINT_LABELS = {"uniform": "anywhere within the answer's length", "early": "early (a small part of it)",
                        "late": "late (most of it)"}
STOP_MARKERS = ("mixed", "token", "string")
STOP_MARKER_LABELS = {"mixed": "half stop tokens, half stop strings", "token": "stop tokens",
                      "string": "stop strings (matched on text)"}


# ---- knobs ----------------------------------------------------------------------------------------------------------
def _delay_default(preset: Preset) -> int | None:
    """The detection delay of the preset's "notices late" server, None when no server notices late."""
    delays = [int(ov["disconnect_detect_delay_steps"]) for _, ov in preset.variants
              if ov.get("disconnect_detect_delay_steps", 0) > 0]
    return delays[0] if delays else None


def _compares_aborts(preset: Preset) -> bool:
    return any("abort_on_disconnect" in ov for _, ov in preset.variants)


def knobs(preset: Preset, base: Scenario, uploaded: bool) -> list[Knob]:
    """The lesson's own knobs, each only where it changes something: request-level knobs only on the preset's own
    requests (not on an uploaded scenario), abandonment only on a generated workload."""
    labels = tuple(label for label, _ in preset.variants)
    delay = _delay_default(preset)
    if delay is not None and base.config.disconnect_detect_delay_steps:  # an uploaded late server's own delay
        delay = base.config.disconnect_detect_delay_steps
    names = {label: "notices late" for label, ov in preset.variants
             if ov.get("disconnect_detect_delay_steps", 0) > 0}
    out = [Knob("servers", "Servers to compare", "multi", list(labels), options=labels, labels=names,
                widget="multiselect", help="Each server runs on the same requests. The late server's delay is "
                "set below.")]
    if "answer_tokens" in preset.knobs and not uploaded:
        out += [
            Knob("answer_tokens", "Answer length (tokens)", "int", preset.knobs["answer_tokens"], min=10, max=4000,
                 step=10, help="The abandoned answer's full length, max_tokens included."),
            Knob("leave_after_tokens", "The user leaves after reading token", "int",
                 preset.knobs["leave_after_tokens"], min=10, max=4000, step=10,
                 help="The client disconnects right after this token arrives; the server learns of it on the "
                      "next step."),
        ]
    if base.workload is not None:
        w = base.workload
        out += [
            Knob("abandon_rate", "Users who leave early (fraction)", "float", w.abandon_rate, min=0.0, max=1.0,
                 step=0.05, help="Each user closes the tab before the answer is done with this probability."),
            Knob("abandon_point", "When they leave", "choice", w.abandon_point, options=ABANDON_POINTS,
                 labels=ABANDON_POINT_LABELS, widget="select",
                 help="Where in its answer a leaving user gives up (a fraction of the answer's length, counted "
                      "from arrival, so a user can also leave while still queued)."),
        ]
    if delay is not None:
        out.append(Knob("delay", "Detection delay of the late server (steps)", "int", delay, min=0, max=500,
                        step=5, help=field_help(EngineConfig, "disconnect_detect_delay_steps")
                        + "; the 'notices late' server only."))
    if _compares_aborts(preset):
        out.append(Knob("timeout", "Client timeout (steps, 0 = none)", "int", base.config.timeout_steps, min=0,
                        max=3000, step=50, help=field_help(EngineConfig, "timeout_steps")
                        + ". Queued requests time out too."))
    if "max_tokens" in preset.knobs and not uploaded:
        out += [
            Knob("max_tokens", "max_tokens (length limit)", "int", preset.knobs["max_tokens"], min=16, max=2048,
                 step=16, help=f"Every answer's length limit. Answers end naturally after "
                               f"{min(r.output_len for r in base.requests):,} to "
                               f"{max(r.output_len for r in base.requests):,} tokens."),
            Knob("stop_marker", "Answers end on", "choice", preset.knobs["stop_marker"], options=STOP_MARKERS,
                 labels=STOP_MARKER_LABELS, widget="select",
                 help="A stop token is seen on the step that generates it; a stop string is matched on the "
                      "detokenized text after the step, so it is caught one step later."),
        ]
    out.append(Knob("unit", "Time axis", "choice", "steps", options=("steps", "ms"),
                    labels={"steps": "engine steps", "ms": "milliseconds"}, widget="segmented"))
    return out


def apply(config: EngineConfig, values: dict[str, Any]) -> EngineConfig:
    """The client timeout is the users' behaviour: every server sees it."""
    return config.replace(timeout_steps=int(values["timeout"])) if "timeout" in values else config


def apply_workload(workload: WorkloadSpec | None, values: dict[str, Any]) -> WorkloadSpec | None:
    if workload is None or "abandon_rate" not in values:
        return workload
    return workload.replace(abandon_rate=float(values["abandon_rate"]), abandon_point=str(values["abandon_point"]))


def apply_requests(scenario: Scenario, values: dict[str, Any]) -> Scenario:
    """The preset's own requests with the request-level knobs applied (answer length, when the user leaves,
    max_tokens, stop marker). Knobs that are absent leave the requests as they are."""
    requests = list(scenario.requests)
    if "answer_tokens" in values:
        requests = [_abandon_at(r, int(values["answer_tokens"]), int(values["leave_after_tokens"]))
                    if r.abort_step is not None else r for r in requests]
    if "max_tokens" in values:
        requests = [_stop_marked(r, i, int(values["max_tokens"]), str(values["stop_marker"]))
                    for i, r in enumerate(requests)]
    return dataclasses.replace(scenario, requests=tuple(requests))


def _abandon_at(r: RequestSpec, answer_tokens: int, leave_after_tokens: int) -> RequestSpec:
    # A request admitted on arrival with a one-step prefill emits token k at step arrival + k - 1, so a user who
    # reads token k disconnects at arrival + k: the article's token 300 -> step 300.
    return dataclasses.replace(r, output_len=answer_tokens, max_tokens=None,
                               abort_step=r.arrival_step + leave_after_tokens)


def _stop_marked(r: RequestSpec, index: int, max_tokens: int, marker: str) -> RequestSpec:
    stop = marker if marker != "mixed" else ("string" if index % 2 else "token")
    return dataclasses.replace(r, max_tokens=max_tokens, stop_type=StopType(stop))


def variants(preset: Preset, scenario: Scenario, values: dict[str, Any]) -> list[tuple[str, Scenario]]:
    """The servers chosen in ``values["servers"]``, each ``scenario`` with its overrides; the late server gets the
    delay knob and a label that says it ("notices after 120 steps")."""
    out = []
    for label, overrides in preset.variants:
        if label not in values["servers"]:
            continue
        changes = dict(overrides)
        if changes.get("disconnect_detect_delay_steps", 0) > 0 and "delay" in values:
            changes["disconnect_detect_delay_steps"] = int(values["delay"])
            label = f"notices after {int(values['delay']):,} steps"
        out.append((label, scenario.with_config(**changes)))
    return out


# ---- measurements ---------------------------------------------------------------------------------------------------
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


def headline(run: Run, unit: str) -> Card:
    """A server's headline number: the tokens it generated for nobody; waste, goodput and waits under it."""
    return Card(f"{run.label}: tokens for nobody", f"{run.summary['wasted_tokens']:,}", run_caption(run, unit),
                "Tokens generated after the user left, or past the end of the answer.")


def run_caption(run: Run, unit: str) -> str:
    """The line under a server's headline number: GPU time wasted, goodput, and how long the others waited."""
    s = run.summary
    wait = s[f"queue_{unit}"]["mean"]
    users = "users who stayed" if _anyone_left([run]) else "users"  # (nobody leaves in a stops-only workload)
    waited = (f"{users} waited {wait:,.0f} {unit} on average" if np.isfinite(wait)
              else "no user stayed to the end")
    return (f"{s['wasted_gpu_ms']:,.0f} ms of GPU time on them · {s['goodput_tok_s']:,.0f} tokens/s read · "
            f"{waited}")


# ---- what to notice -------------------------------------------------------------------------------------------------
def notices(runs: Sequence[Run], unit: str) -> list[str]:
    """Sentences computed from the runs: the article's numbers (``abandon_story``, when the runs tell it), waste,
    goodput, others' waiting, KV held for nobody, late detection, timeouts and stop checks."""
    if not runs:
        return []
    runs = list(runs)
    story = abandon_story(runs)
    out = []
    if story is not None:  # the story already gives the waste and the KV of the one abandoned request
        out.extend(_story_sentences(story))
    else:
        out.extend(_waste_sentences(runs))
    out.extend(_goodput_sentence(runs))
    out.extend(_waiting_sentences(runs, unit))
    if story is None:
        out.extend(_kv_sentence(runs))
    out.extend(_late_sentences(runs))
    out.extend(_timeout_sentences(runs))
    out.extend(_stop_sentences(runs))
    return out


def _story_sentences(s: Story) -> list[str]:
    cfg = s.config
    out = [f"Without an abort the engine generated {s.wasted_tokens:,} tokens for nobody after the user left at "
           f"token {s.tokens_read:,}, and {s.request_id}'s KV grew to {s.end_kv_tokens:,} tokens = "
           f"{mb(s.end_kv_tokens, cfg):,.0f} MB ({count(s.end_blocks, 'block')} of {cfg.block_size} tokens)."]
    freed = (f"With an abort, the {s.freed_kv_tokens:,} tokens of KV it held ({mb(s.freed_kv_tokens, cfg):,.0f} MB) "
             f"were freed at step {s.abort_step:,}, the very next step after the user's last token")
    if s.waiter_id is not None:
        freed += (f", and {s.waiter_id} started at step {s.waiter_start_abort:,} instead of "
                  f"{s.waiter_start_no_abort:,}: {s.earlier_steps:,} steps earlier")
    return out + [freed + "."]


def _waste_sentences(runs: list[Run]) -> list[str]:
    if not any(r.summary["wasted_tokens"] for r in runs):
        aborted = [(r.label, r.summary["num_aborted"]) for r in runs if r.summary["num_aborted"]]
        if aborted:  # the aborts are why nothing was wasted
            which = join_and([f"{label} aborted {count(n, 'request')}" for label, n in aborted])
            whose = "its user" if sum(n for _, n in aborted) == 1 else "their users"
            return [f"No server generated a token nobody read: {which} the moment {whose} left."]
        return ["No server generated a token nobody read: no user left before their answer was done, and no "
                "answer ran past its end."]
    out, clean = [], []
    for run in runs:
        s = run.summary
        if not s["wasted_tokens"]:
            clean.append(run.label)
            continue
        share = s["wasted_tokens"] / s["output_tokens"] if s["output_tokens"] else 0.0
        out.append(f"{run.label}: {s['wasted_tokens']:,} tokens nobody read ({_percent(share)} of everything it "
                   f"generated), {s['wasted_gpu_ms']:,.0f} ms of GPU time.")
    if clean:
        out.append(f"{' and '.join(clean)}: no token generated for nobody.")
    return out


def _goodput_sentence(runs: list[Run]) -> list[str]:
    if len(runs) < 2:
        return []
    good = {r.label: r.summary["goodput_tok_s"] for r in runs if np.isfinite(r.summary["goodput_tok_s"])}
    if len(good) < 2:
        return []
    best, worst = max(good, key=good.get), min(good, key=good.get)
    if good[best] <= 0 or (good[best] - good[worst]) / good[best] < 0.01:
        return []
    # (not "goodput", which in serving papers counts requests per second that meet a latency target)
    return [f"Useful throughput (tokens somebody read, per second of the run): {good[best]:,.0f} tokens/s with {best}, "
            f"{good[worst]:,.0f} with {worst} ({pct_change(good[best], good[worst])})."]


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
    return {run.label: run.summary for run in runs} if stayed is None else _waiting_of(runs, stayed)


def _waiting_of(runs: list[Run], stayed: np.ndarray) -> dict[str, dict[str, Any]]:
    """waiting_of_the_same_users over the users ``stayed`` marks."""
    out = {}
    for run in runs:
        lat = metrics.request_latencies(run.trace)
        out[run.label] = {"queue_steps": metrics.stats(lat["queue_steps"][stayed]),
                          "queue_ms": metrics.stats(lat["queue_ms"][stayed]), "num_served": int(stayed.sum())}
    return out


def _anyone_left(runs: list[Run]) -> bool:
    """Did any user of these runs leave (close the tab, time out) before the answer was done?"""
    return any((run.trace.requests["disconnect_step"] != NO_STEP).any() for run in runs)


def _waiting_sentences(runs: list[Run], unit: str) -> list[str]:
    """How much longer the users who stayed queued under each server than under the first, over the same users."""
    stayed = stayed_under_every_server(runs)
    if stayed is None or not stayed.any():
        return []
    waits = {label: w[f"queue_{unit}"]["mean"] for label, w in _waiting_of(runs, stayed).items()}
    first = runs[0]
    a = waits[first.label]
    one = stayed.sum() == 1
    every = "both" if len(runs) == 2 else "every server"
    if not _anyone_left(runs):
        who = "the one user" if one else f"the {int(stayed.sum()):,} users"
    else:
        who = f"the user who stayed to the end under {every}" if one else \
            f"the {int(stayed.sum()):,} users who stayed to the end under {every}"
    out = []
    for run in runs[1:]:
        b = waits[run.label]
        if abs(b - a) < 0.5:
            continue
        more = "more" if b > a else "less"
        gap = f"{abs(round(b) - round(a)):,}"  # (from the numbers shown, so that they subtract)
        out.append(f"The waiting time others lose: {who} waited {b:,.0f} {unit}{'' if one else ' on average'} in "
                   f"the queue under {run.label}, against {a:,.0f} under {first.label} ({gap} "
                   f"{'step' if gap == '1' and unit == 'steps' else unit} {more}{'' if one else ' each'}).")
    return out


def _kv_sentence(runs: list[Run]) -> list[str]:
    parts = []
    for run in runs:
        tokens, step = peak_kv_for_nobody(run.trace)
        if tokens <= 0:
            continue
        cfg = run.scenario.config
        pool = cfg.num_blocks * cfg.block_size
        parts.append(f"{mb(tokens, cfg):,.0f} MB ({_percent(tokens / pool)} of the pool) at step {step:,} under "
                     f"{run.label}")
    if not parts:
        return []
    return ["KV memory held for nobody at its worst: " + "; ".join(parts) + "."]


def _late_sentences(runs: list[Run]) -> list[str]:
    out = []
    for run in runs:
        cfg = run.scenario.config
        if not cfg.abort_on_disconnect or not cfg.disconnect_detect_delay_steps:
            continue
        r = run.trace.requests
        left = (r["disconnect_step"] != NO_STEP) & (r["num_wasted_tokens"] > 0)
        if not left.any():
            continue
        noticed = left & (r["status"] == RequestStatus.FINISHED_ABORTED)
        done_first = left & ~noticed  # the answer ended before the server noticed its user was gone
        delay, wasted = cfg.disconnect_detect_delay_steps, int(r["num_wasted_tokens"][left].sum())
        if not noticed.any():
            gone = count(int(done_first.sum()), "abandoned request")
            out.append(f"A server that {run.label} never got to abort: {gone} finished for nobody within the "
                       f"{delay:,} steps before it would have noticed ({wasted:,} tokens nobody read).")
            continue
        rest = (f"; the other {count(int(done_first.sum()), 'request')} finished for nobody before it noticed"
                if done_first.any() else "")
        out.append(f"A server that {run.label} kept {count(int(left.sum()), 'abandoned request')} running after "
                   f"their users left: it aborted {int(noticed.sum()):,} when it noticed{rest}; "
                   f"{wasted:,} tokens for nobody, at most {delay:,} each.")
    return out


def _timeout_sentences(runs: list[Run]) -> list[str]:
    out = []
    for run in runs:
        timeout = run.scenario.config.timeout_steps
        gone = timed_out(run)
        if not timeout or not gone.any():
            continue
        r = run.trace.requests
        first = r["first_scheduled_step"]
        queued = gone & ((first == NO_STEP) | (first >= r["disconnect_step"]))
        started = gone & ~queued
        n, q, k = int(gone.sum()), int(queued.sum()), int(started.sum())
        mean_wait = float((first[started] - r["arrival_step"][started]).mean()) if k else 0.0
        after = f"after waiting {mean_wait:,.0f} steps{' on average' if k > 1 else ''} before starting"
        if q and k:
            how = f": {q:,} still queued, {k:,} {after}"
        elif q:
            how = ", still queued" if n == 1 else ", all still queued"
        else:
            how = f", {after}" if n == 1 else f", all {after}"
        them, their = ("it", "its answer") if n == 1 else ("them", "their answers")
        what = (f"it dropped {them} from the queue and the batch at once" if run.scenario.config.abort_on_disconnect
                else f"without an abort it still generated {their} for nobody")
        out.append(f"With a {timeout:,}-step client timeout, {count(n, 'user')} gave up under {run.label}{how}; "
                   f"{what}.")
    return out


def _stop_sentences(runs: list[Run]) -> list[str]:
    out = []
    for run in runs:
        specs = run.scenario.requests
        # the answers that end on a stop and ran to their end (not turned away on arrival, nor abandoned)
        finished = np.isin(run.trace.requests["status"], (RequestStatus.FINISHED_STOPPED,
                                                          RequestStatus.FINISHED_LENGTH_CAPPED))
        ends = np.array([s.ends_on_stop for s in specs], dtype=bool) & finished
        if not ends.any():
            continue
        wasted = run.trace.requests["num_wasted_tokens"]
        is_string = np.array([s.stop_type is StopType.STRING for s in specs]) & ends
        is_token = ~is_string & ends
        if run.scenario.config.stop_check is StopCheck.EVERY_STEP:
            if is_string.any():
                n = int(is_string.sum())
                tokens = (f"; the {int(is_token.sum()):,} ending on a stop token wasted {int(wasted[is_token].sum()):,}"
                          if is_token.any() else "")
                out.append(f"{run.label}: the {count(n, 'answer')} ending on a stop string each ran one token past "
                           f"{'its' if n == 1 else 'their'} end (the string is matched on the text after the step): "
                           f"{count(int(wasted[is_string].sum()), 'token')}{tokens}.")
        else:
            limit = max(s.limit_tokens for s in specs)
            out.append(f"{run.label}: every answer that ends on its own still runs to max_tokens ({limit:,}): "
                       f"{int(wasted[ends].sum()):,} tokens past the ends of {int(ends.sum()):,} answers, each "
                       f"holding its slot and KV meanwhile.")
    return out


def inspector_step(trace: Trace) -> int:
    """Where the step inspector opens: the first abort, else the first disconnect, else the first finish that
    stopped early or ran to its limit past the end, else step 0."""
    for kind in (EventKind.ABORT, EventKind.DISCONNECT):
        for e in trace.events:
            if e.kind is kind:
                return e.step
    wasted = np.flatnonzero(trace.steps["num_wasted_tokens"])
    return int(wasted[0]) if len(wasted) else 0


def gantt_notes(run: Run, story: Story | None) -> dict[str, str]:
    """Notes beside the article's two requests on the Gantt chart."""
    if story is None:
        return {}
    r = run.trace.requests
    row = run.trace.request_ids.index(story.request_id)
    left = int(r["disconnect_step"][row])
    notes = {story.request_id: f"user left at step {left:,}"}
    if story.waiter_id is not None:
        w = run.trace.request_ids.index(story.waiter_id)
        notes[story.waiter_id] = f"starts at step {int(r['first_scheduled_step'][w]):,}"
    return notes


def gantt_columns(runs: list[Run]) -> int:
    """Side-by-side Gantt charts for many requests; one full-width chart per server for a handful, so the notes
    beside the bars and the short bars stay readable."""
    if max(run.trace.num_requests for run in runs) <= 12:
        return 1
    return 2 if len(runs) <= 4 else 3


def _percent(share: float) -> str:
    """A share for a sentence: whole percents, one decimal below 1% so a small waste never reads as 0%."""
    return f"{share:.1%}" if 0 < share < 0.01 else f"{share:.0%}"
