"""The Cancellation lesson's logic, the interface every lesson has (``lessons/interface.py``): its knobs (users who
leave, the late server's delay, the client timeout, max_tokens and stop markers), the server variants it compares on
one workload, the headline cards and the "what to notice" sentences in the page's order, and the page's helpers (the
player's first step, the Gantt's notes). No Streamlit calls here, so it is testable on its own. Its parts: what it
measures from the runs, the article's story among them (``measures.py``), the sentences (``notices.py``).

Units: KV memory in decimal MB (1 MB = 10^6 B) of the model's KV bytes per token (131,072 B for Llama 3.1 8B,
so 1,000 tokens = 131 MB); block-granular figures count whole blocks of ``block_size`` tokens.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from lessons.run import Run
from sim.config import EngineConfig, field_help
from sim.events import EventKind
from sim.presets import Preset
from sim.request import RequestSpec, StopType
from sim.scenario import Scenario
from sim.trace import Trace
from sim.workload import ABANDON_POINTS, WorkloadSpec
from ui.controls import Knob
from ui.glossary import term_link
from ui.wording import Card

from . import notices as sentences
from .measures import Story, abandon_story, anyone_left

LESSON = "cancellation"
QUESTION = (  # (a glossary term linked at its first use)
    f"A user who closes the tab mid-answer (unless the server can {term_link('abort')}), or an answer that has "
    f"already {term_link('stop check', 'reached its end')}, can leave the server generating tokens that nobody will "
    f"ever read. How much GPU time and {term_link('KV cache', 'KV memory')} does that waste, and how long do the "
    "users who stay wait because of it?"
)

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


# ---- headline and notices ---------------------------------------------------------------------------------------
def headline(run: Run, unit: str) -> Card:
    """A server's headline number: the tokens it generated for nobody; waste, useful throughput and waits under it."""
    return Card(f"{run.label}: tokens for nobody", f"{run.summary['wasted_tokens']:,}", run_caption(run, unit),
                "Tokens generated after the user left, or past the end of the answer.")


def run_caption(run: Run, unit: str) -> str:
    """The line under a server's headline number: GPU time wasted, useful throughput, and how long the others waited."""
    s = run.summary
    wait = s[f"queue_{unit}"]["mean"]
    users = "users who stayed" if anyone_left([run]) else "users"  # (nobody leaves in a stops-only workload)
    waited = (f"{users} waited {wait:,.0f} {unit} on average" if np.isfinite(wait)
              else "no user stayed to the end")
    return (f"{s['wasted_gpu_ms']:,.0f} ms of GPU time on them · {s['read_tok_s']:,.0f} tokens/s read · "
            f"{waited}")


def notices(runs: Sequence[Run], unit: str) -> list[str]:
    """Sentences computed from the runs: the article's numbers (``abandon_story``, when the runs tell it), waste,
    useful throughput, others' waiting, KV held for nobody, late detection, timeouts and stop checks."""
    if not runs:
        return []
    runs = list(runs)
    story = abandon_story(runs)
    out = []
    if story is not None:  # the story already gives the waste and the KV of the one abandoned request
        out.extend(sentences.story_sentences(story))
    else:
        out.extend(sentences.waste_sentences(runs))
    out.extend(sentences.useful_throughput_sentence(runs))
    out.extend(sentences.waiting_sentences(runs, unit))
    if story is None:
        out.extend(sentences.kv_sentence(runs))
    out.extend(sentences.late_sentences(runs))
    out.extend(sentences.timeout_sentences(runs))
    out.extend(sentences.stop_sentences(runs))
    return out


# ---- page helpers -----------------------------------------------------------------------------------------------
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
