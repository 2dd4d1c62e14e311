"""The figures a lesson's "what to notice" sentences may quote, computed afresh from the simulator, and the numbers
the sentences do quote (tests/app/test_notice_sweep.py checks each of the second against the first).

A number in a sentence is a *figure* unless it is part of a name. Names are: the names of things on the page (the
runs' labels, request and client ids, the model's name), text in code spans and link targets, and any number glued
to a letter ("p99", "r12", "8B", "H100"); a number glued to an "x" ("23x", "x1.3") is a multiple, and a unit after
a number ("%", "ms", "s", "MB", "GiB", ...) says what it counts.

A figure matches when something the simulator computes for the runs the page made rounds to it at the precision it
is printed with ("1,100" within 0.5, "5.9 ms" within 0.05). What the simulator computes (``RunFigures``): the
scenario (config, derived sizes, workload, every request's fields), the trace (per-request columns and latencies,
events, per-step series: max, mean, argmax, last), ``sim.metrics`` (summary, per-client rows),
``sim.preemption_metrics`` (every preemption, its cost), ``sim.fairness_metrics`` (service gaps and bounds for each
pair of clients, fair-share index, lifts, starvation, charges), aggregates of each per-request column over the
groups of requests a lesson talks about (all, served, per client, per status, ...), and the lesson modules' named
constants. Sizes are compared in bytes (tokens x the model's KV bytes per token, blocks x the block's bytes),
seconds as ms.

Derived figures are allowed only along lines a sentence can draw (``Universe``): the same figure of two runs (their
difference, ratio, change in percent; or where a third run lies between them), the same request under two runs, two
fields of one request or one preemption (a wait: resume step minus preemption step), two figures of one run in the
same unit (a share: wasted tokens over output tokens), and two numbers quoted in the same sentence ("from 1,100 to
500 steps (-55%)"). No difference of two unrelated figures is allowed: over thousands of figures those would match
any number.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import math
import pkgutil
import re
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sim import fairness_metrics, metrics, preemption_metrics
from sim.config import cdiv
from sim.engine import simulate
from sim.events import EventKind
from sim.request import NO_STEP, RequestStatus
from sim.scenario import Scenario
from sim.trace import Trace

# ---- the numbers a sentence quotes -------------------------------------------------------------------------------

BYTE_UNITS = {"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KiB": 2**10, "MiB": 2**20,
              "GiB": 2**30, "TiB": 2**40}
_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
_UNIT_AFTER = re.compile(r"(?P<unit>%|x(?![A-Za-z0-9])|\s?(?:ms|s|" + "|".join(BYTE_UNITS) + r")(?![A-Za-z0-9/'’]))")


@dataclass(frozen=True)
class Quoted:
    """One number of a sentence: ``value`` and ``tol`` in the unit it is compared in (bytes for sizes, ms for
    seconds, a fraction for percents), and its ``kind``: "plain", "percent", "times" or "bytes"."""

    text: str  # as printed, with its sign and unit ("-55%", "262 MB")
    value: float  # its magnitude (the sign is in ``negative``)
    tol: float
    kind: str
    negative: bool = False
    start: int = 0  # where it starts in the sentence
    end: int = 0  # ... and ends (its unit included)
    listed: int = 0  # "r12, r13 and 100 more": the names listed before it (the figure is the whole list's count)


def sentences(info_values: Iterable[str]) -> list[str]:
    """The sentences of the "what to notice" boxes (``st.info`` bodies: a bold title, then one "- " line each)."""
    out = []
    for value in info_values:
        out += [line[2:].strip() for line in value.splitlines() if line.startswith("- ")]
    return out


def blank_names(sentence: str, names: Iterable[str]) -> str:
    """``sentence`` with every name (longest first, whole words only), code span and link target blanked out."""
    def blank(m: re.Match) -> str:  # (the same length: positions in the text are positions in the sentence)
        return " " * len(m.group())

    text = re.sub(r"(?<=\])\([^)]*\)", blank, sentence)  # a Markdown link's target
    text = re.sub(r"`[^`]*`", blank, text)
    for name in sorted({n for n in names if n and n.strip()}, key=len, reverse=True):
        text = re.sub(rf"(?<![\w]){re.escape(name)}(?![\w])", lambda m: "#" * len(m.group()), text)
    return text


def quoted_numbers(sentence: str, names: Iterable[str] = ()) -> list[Quoted]:
    """The figures ``sentence`` quotes (see the module docstring for what is a name, not a figure)."""
    text = blank_names(sentence, names)
    out = []
    for m in _NUMBER.finditer(text):
        start, end = m.span()
        before = text[start - 1] if start else " "
        times_before = before == "x" and (start < 2 or not text[start - 2].isalnum())
        if (before.isalnum() or before in "_.#") and not times_before:
            continue  # part of a name: "p99", "r12", "v1.2"
        unit_m = _UNIT_AFTER.match(text, end)
        unit = unit_m.group("unit").strip() if unit_m else ""
        after = text[unit_m.end() if unit_m else end:][:1]
        if not unit and (after.isalnum() or after in "_#"):
            continue  # "8B", "3rd"
        digits = m.group().replace(",", "")
        decimals = len(digits.split(".")[1]) if "." in digits else 0
        value, tol = float(digits), 0.5 * 10.0**-decimals
        negative = before in "-−" and (start < 2 or not text[start - 2].isalnum())
        kind = "plain"
        if unit == "%":
            kind, value, tol = "percent", value / 100, tol / 100
        elif unit == "x" or times_before:
            kind = "times"
        elif unit in BYTE_UNITS:
            kind, value, tol = "bytes", value * BYTE_UNITS[unit], tol * BYTE_UNITS[unit]
        elif unit == "s":
            value, tol = value * 1000, tol * 1000  # compared in ms
        shown = sentence[start - (1 if negative or times_before else 0):(unit_m.end() if unit_m else end)]
        listed = 0
        if kind == "plain" and text.startswith(" more", end):  # the rest of a list of names (ui.wording.join_and)
            clause = re.split(r"[.:;]\s", text[:start])[-1]
            listed = len(re.findall(r"#+", clause))
        out.append(Quoted(shown.strip(), value, tol * (1 + 1e-9) + 1e-12, kind, negative, start,
                          unit_m.end() if unit_m else end, listed))
    return out


_MISSING = re.compile(r"—|\bnan\b|\binf\b", re.IGNORECASE)  # (a figure a sentence quotes that the run has not got)
_DOWN = ("fell", "falls", "fall", "cut", "cuts", "dropped", "drops", "shrinks", "shrank", "lowering", "lowered")
_UP = ("rose", "rises", "rise", "raised", "raises", "raising", "grows", "grew", "grow", "climbs", "climbed")
_DIRECTION = re.compile(r"\b(?P<verb>" + "|".join(_DOWN + _UP) + r")\b[^.;:]*?\bfrom\b")


def direction_problems(sentence: str, quotes: Sequence[Quoted]) -> list[str]:
    """Where ``sentence`` says a figure fell (rose, grows, ...) "from X to Y", Y must be below (above) X as
    printed."""
    out = []
    for m in _DIRECTION.finditer(sentence):
        after = [q for q in quotes if q.start >= m.end()]
        if not after:
            continue
        x = after[0]
        to = sentence.find(" to ", x.end)
        y = next((q for q in after[1:] if to >= 0 and q.start > to), None)
        if y is None or x.kind != y.kind:
            continue
        a, b = (-q.value if q.negative else q.value for q in (x, y))
        down = m.group("verb") in _DOWN
        if (b >= a) if down else (b <= a):
            out.append(f"says {m.group('verb')!r} from {x.text} to {y.text}")
    return out


# ---- the figures of one run --------------------------------------------------------------------------------------

def _leaves(prefix: str, value: Any, out: dict[str, float], max_len: int = 64) -> None:
    """Every finite number inside ``value`` (dicts, dataclasses, named tuples, sequences, arrays up to ``max_len``
    long) as ``out[path] = number``; bools and enums are not numbers here."""
    if isinstance(value, bool | enum.Enum | str) or value is None:
        return
    if isinstance(value, int | float | np.integer | np.floating):
        if math.isfinite(float(value)):
            out[prefix] = float(value)
        return
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _leaves(f"{prefix}.{f.name}", getattr(value, f.name), out, max_len)
        return
    if hasattr(value, "_asdict"):
        value = value._asdict()
    if isinstance(value, dict):
        for k, v in value.items():
            _leaves(f"{prefix}.{k}", v, out, max_len)
        return
    if isinstance(value, np.ndarray):
        if value.ndim == 1 and len(value) <= max_len and value.dtype.kind in "iuf":
            for i, v in enumerate(value.tolist()):
                _leaves(f"{prefix}[{i}]", v, out, max_len)
        return
    if isinstance(value, list | tuple) and len(value) <= max_len:
        for i, v in enumerate(value):
            _leaves(f"{prefix}[{i}]", v, out, max_len)


def _family(name: str) -> str:
    """What a figure counts, from its name: "tokens", "blocks", "ms", "steps", "requests" or "" (to pair figures
    of one unit, and to know which ones are sizes)."""
    last = name.rsplit(".", 1)[-1].lower()
    if "block" in last:
        return "blocks"
    if "token" in last or last.endswith("_len") or last in ("pool_tokens", "max_input"):
        return "tokens"
    if last.endswith("_ms") or "ms" in name.lower().split("."):
        return "ms"
    if "step" in last:
        return "steps"
    if last.startswith("num_") or last == "count":
        return "requests"
    return ""


def _fairness(trace: Trace) -> dict[str, Any]:
    """``sim.fairness_metrics`` of a run with clients: each pair's service gap and bound, fair shares, lifts."""
    n = len(trace.client_ids)
    if not n or not trace.num_steps:
        return {}
    waiting = fairness_metrics.client_waiting(trace)
    out: dict[str, Any] = {
        "bound": fairness_metrics.vtc_bound_parts(trace),
        "all_waiting": fairness_metrics.served_while_all_waiting(trace, waiting),
        "starvation": fairness_metrics.longest_starvation_steps(trace, waiting),
        "lifts": fairness_metrics.lifts(trace, waiting),
        "charge": fairness_metrics.mean_request_charge(trace),
        "output_share": fairness_metrics.output_token_share(trace),
        "mean_batch": metrics.mean_num_running(trace),
        "idle_slot_share": metrics.idle_slot_share(trace),
    }
    from lessons.fairness import stats  # (the window the lesson measures fair shares over)
    out["fair"] = {k: v for k, v in fairness_metrics.fair_share_index(trace, stats.FAIRNESS_WINDOW_STEPS).items()
                   if k != "per_window"}
    for a in range(n):
        for b in range(a + 1, n):
            gap = fairness_metrics.service_gap(trace, a, b)
            out[f"pair[{a},{b}]"] = {"gap": gap["gap"], "bound": fairness_metrics.vtc_bound_parts(trace, (a, b))}
    return out


def _overload(trace: Trace) -> dict[str, Any]:
    """The Overload lesson's figures of a run: its load-sweep point (lessons.overload.lesson's ``while_offered``:
    the measure's one definition, as the fairness window above), the requests served too late, and with traffic
    without targets, each class's figures (how many met their targets, p99 TTFT, the batch's median finish)."""
    if not trace.num_steps or trace.num_requests < 2:
        return {}
    from lessons.overload.lesson import classes, while_offered
    served = metrics.served_mask(trace)
    met = metrics.request_slo(trace)["slo_met"]
    out: dict[str, Any] = {"while_offered": list(while_offered(trace)), "late": int(served.sum() - met.sum())}
    two = classes(trace)
    if two is not None:
        with_targets = served & trace.slo
        ttft = metrics.request_latencies(trace)["ttft_ms"][with_targets]
        out["classes"] = {**two._asdict(), "ttft_p99": float(np.percentile(ttft, 99)) if len(ttft) else float("nan")}
    return out


_STEP_FIELDS = ("arrival_step", "first_scheduled_step", "first_token_step", "finish_step", "disconnect_step",
                "abort_step")
_EVENT_FIELDS = ("step", "num_tokens", "num_scheduled_tokens", "num_cached_tokens", "num_blocks", "num_free_blocks",
                 "num_cpu_blocks", "num_free_cpu_blocks", "num_budget_tokens", "num_waited_steps")


@dataclass
class RunFigures:
    """Everything the simulator says about one run (see the module docstring). A figure of one request (its
    columns, its events, its preemptions) counts only in a sentence that names the request: over hundreds of
    requests, those figures would cover every number below a thousand."""

    scalars: dict[str, float]  # name -> figure of the run (config, summary, per-client rows, fairness, series)
    aggregates: np.ndarray  # unnamed figures of the run: over groups of requests, sums of preemptions and events
    per_request: dict[str, np.ndarray]  # [requests] float64, NaN where there is none
    of_request: dict[int, np.ndarray]  # row -> the figures of its events and preemptions
    token_figures: np.ndarray  # the run's figures that count tokens (for their sizes in bytes)
    block_figures: np.ndarray  # ... that count blocks
    request_ids: list[str]
    kv_bytes_per_token: int
    block_bytes: int
    served: np.ndarray  # [requests] bool
    request_digest: str  # runs of one request list pair up request by request
    trace: Trace

    def request_figures(self, rows: Iterable[int]) -> np.ndarray:
        """The figures of the requests at ``rows``: their columns, events, preemptions, and who ran while each
        waited."""
        parts = []
        for row in rows:
            values = np.array([v[row] for v in self.per_request.values()], dtype=np.float64)
            parts += [values, self.of_request.get(row, np.zeros(0)), _while_waiting(self.trace, row),
                      _behind_head(self.trace, row)]
        if not parts:
            return np.zeros(0)
        return np.concatenate(parts)

    def request_sizes(self, rows: Iterable[int]) -> np.ndarray:
        """The sizes in bytes of the token and block counts of the requests at ``rows``."""
        parts = []
        for row in rows:
            counts = {k: v[row] for k, v in self.per_request.items() if _family(k) in ("tokens", "blocks")}
            parts.append(np.array([v * (self.block_bytes if k.endswith(".blocks") or _family(k) == "blocks"
                                        else self.kv_bytes_per_token) for k, v in counts.items()]))
            parts.append(self.of_request.get(row, np.zeros(0)) * self.kv_bytes_per_token)
            parts.append(self.of_request.get(row, np.zeros(0)) * self.block_bytes)
        return np.concatenate(parts) if parts else np.zeros(0)


def run_figures(scenario: Scenario, trace: Trace, constants: dict[str, float] | None = None) -> RunFigures:
    cfg = scenario.config
    scalars: dict[str, float] = {}
    _leaves("config", cfg, scalars)
    scalars.update({  # sizes the config implies
        "config.block_bytes": cfg.block_bytes, "config.kv_bytes_per_token": cfg.model.kv_bytes_per_token,
        "config.effective_max_model_len": cfg.effective_max_model_len, "config.watermark_blocks": cfg.watermark_blocks,
        "config.pool_tokens": cfg.num_blocks * cfg.block_size,
        "config.cpu_pool_tokens": cfg.num_cpu_blocks * cfg.block_size,
        # the lognormal prediction error's spread as a factor (sigma 0.25: two predictions in three within x1.3)
        "config.prediction_spread": math.exp(cfg.prediction_error_sigma),
    })
    if scenario.workload is not None:
        _leaves("workload", scenario.workload, scalars)
    _leaves("summary", metrics.summary(trace), scalars)
    for row in metrics.per_client(trace):
        _leaves(f"client[{row['client']}]", {k: v for k, v in row.items() if k != "client"}, scalars)
    _leaves("fairness", _fairness(trace), scalars)
    _leaves("overload", _overload(trace), scalars)
    series = dict(trace.steps)
    if trace.num_steps:
        # KV held past an answer's end (sim.metrics), and with the KV of requests whose user left (the trace's
        # orphan_kv_tokens, which past_end_kv_tokens complements by its definition): the KV held for nobody
        series["past_end_kv_tokens"] = metrics.past_end_kv_tokens(trace)
        series["nobody_kv_tokens"] = series["past_end_kv_tokens"] + trace.steps["orphan_kv_tokens"]
    for name, column in series.items():
        if len(column):
            scalars.update({f"steps.max_{name}": float(column.max()), f"steps.mean_{name}": float(column.mean()),
                            f"steps.argmax_{name}": float(np.argmax(column)), f"steps.last_{name}": float(column[-1])})
    for name in trace.clients:
        values = trace.clients[name]
        if values.size:
            for c, cid in enumerate(trace.client_ids[:64]):
                scalars[f"clients.max_{name}[{cid}]"] = float(values[:, c].max())
                scalars[f"clients.last_{name}[{cid}]"] = float(values[-1, c])
    scalars.update(constants or {})

    # per request: the spec, the trace's columns, latencies, time between tokens; NaN where there is none
    n = trace.num_requests
    per_request: dict[str, np.ndarray] = {}
    for f in ("arrival_step", "prompt_len", "output_len", "priority", "abort_step", "prefix_len", "max_tokens"):
        per_request[f"spec.{f}"] = np.array([np.nan if getattr(r, f) is None else getattr(r, f)
                                             for r in scenario.requests], dtype=np.float64)
    per_request["spec.limit_tokens"] = np.array([r.limit_tokens for r in scenario.requests], dtype=np.float64)
    per_request["abort_step"] = per_request.pop("spec.abort_step")
    for name, column in trace.requests.items():
        if name in ("client", "status"):
            continue
        values = column.astype(np.float64)
        if name.endswith("_step"):
            values[column == NO_STEP] = np.nan
        per_request[name] = values
    for name, values in {**metrics.request_latencies(trace), **metrics.request_tbt(trace)}.items():
        per_request[f"latency.{name}"] = values
    for a, b in zip(_STEP_FIELDS, _STEP_FIELDS[1:], strict=False):  # (a request's waits between its steps)
        per_request[f"{a}-{b}"] = per_request[b] - per_request[a]
    for name in [k for k in per_request if _family(k) == "tokens"]:  # the blocks a request's tokens fill
        per_request[f"{name}.blocks"] = np.ceil(per_request[name] / cfg.block_size)

    # groups of requests a sentence speaks of, and the columns over each: a count, token columns' sums, every
    # column's mean and max
    r = trace.requests
    served = metrics.served_mask(trace)
    status = r["status"]
    specs = scenario.requests
    groups = {"all": np.ones(n, dtype=bool), "served": served, "left": r["disconnect_step"] != NO_STEP,
              "wasted": r["num_wasted_tokens"] > 0, "preempted": r["num_preemptions"] > 0,
              "queued": r["first_scheduled_step"] > r["arrival_step"],
              "stop_string": np.array([s.stop_type.value == "string" for s in specs], dtype=bool),
              "stop_token": np.array([s.stop_type.value == "token" for s in specs], dtype=bool),
              "ends_on_stop": np.array([s.ends_on_stop for s in specs], dtype=bool),
              "top_priority": r["priority"] == (r["priority"].min() if n else 0)}
    groups.update({f"status.{s.name}": status == s for s in RequestStatus})
    groups.update({f"client{c}": r["client"] == c for c in range(min(len(trace.client_ids), 64))})
    groups.update({f"not.client{c}": r["client"] != c for c in range(min(len(trace.client_ids), 64))})
    groups.update({f"{a}&{b}": groups[a] & groups[b] for a in ("queued", "left", "top_priority", "ends_on_stop")
                   for b in ("served", "wasted", "queued", "stop_string", "stop_token") if a != b})
    groups.update({f"not.{k}": ~v for k, v in groups.items() if k in ("left", "queued", "preempted")})
    groups.update({f"served&{k}": served & v for k, v in groups.items() if k.startswith(("client", "not.client"))})
    aggregates = [float(mask.sum()) for mask in groups.values()]
    for name, values in per_request.items():
        is_tokens = _family(name) == "tokens" and not name.endswith(".blocks")
        for mask in groups.values():
            v = values[mask]
            v = v[np.isfinite(v)]
            if len(v):
                aggregates += [float(v.mean()), float(v.max())] + ([float(v.sum())] if is_tokens else [])

    # preemptions, each with what bringing it back costs; events; both as figures of their request
    of_request: dict[int, list[float]] = {}
    records, token_figures, block_figures = [], [], []
    for p in preemption_metrics.preemptions(trace):
        cost = preemption_metrics.preemption_cost(p.num_tokens, cfg)
        back = p.resume_step if p.resume_step != NO_STEP else np.nan
        fields = [p.step, p.num_tokens, p.num_blocks, back, back - p.step, trace.num_steps - p.step,
                  p.num_resume_tokens, p.num_cached_tokens, p.num_recomputed_tokens, cost.num_blocks,
                  cost.recompute_ms, cost.swap_ms, cost.swap_transfer_ms, cost.swap_overhead_ms,
                  cdiv(p.num_resume_tokens, cfg.block_size), cost.effective_gb_s]
        records.append(np.array(fields, dtype=np.float64))
        of_request.setdefault(p.row, []).extend(fields)
    per_kind: dict[Any, int] = {}
    per_row_kind: dict[tuple[Any, int], int] = {}
    for e in trace.events:
        per_kind[e.kind] = per_kind.get(e.kind, 0) + 1
        per_row_kind[(e.kind, e.row)] = per_row_kind.get((e.kind, e.row), 0) + 1
        fields = [getattr(e, f) for f in _EVENT_FIELDS]
        of_request.setdefault(e.row, []).extend(fields)
        if 0 <= e.other_row != e.row:
            of_request.setdefault(e.other_row, []).extend(fields)
    for (_, row), k in per_row_kind.items():
        of_request[row].append(k)
    aggregates += list(per_kind.values())
    if records:  # sums over the run's preemptions, and over those that came back
        table = np.vstack(records)
        for which in (np.ones(len(table), dtype=bool), np.isfinite(table[:, 3])):
            aggregates += np.nansum(table[which], axis=0).tolist()
        token_figures += np.nansum(table[:, [1, 6, 7, 8]], axis=0).tolist()
        block_figures += table[:, [2, 9]].ravel().tolist()
    for name, value in scalars.items():
        family = _family(name)
        if family == "tokens":
            token_figures.append(value)
        elif family == "blocks":
            block_figures.append(value)
    token_figures += aggregates  # (sums of token columns are among them: the KV of a group of requests)
    for name, value in list(scalars.items()):  # what the cost model charges to prefill a count of tokens again
        if _family(name) == "tokens":
            scalars[f"{name}.recompute_ms"] = cfg.cost.recompute_ms(value)
    return RunFigures(scalars, np.array(aggregates, dtype=np.float64), per_request,
                      {row: np.array(v, dtype=np.float64) for row, v in of_request.items()},
                      np.array(token_figures, dtype=np.float64), np.array(block_figures, dtype=np.float64),
                      list(trace.request_ids), cfg.model.kv_bytes_per_token, cfg.block_bytes, served,
                      _digest(scenario), trace)


def _while_waiting(trace: Trace, row: int) -> np.ndarray:
    """Who ran while the request at ``row`` waited for its first step: how many other requests, and the steps
    the ones that ran longest ran meanwhile (the four longest)."""
    r = trace.requests
    a, b = int(r["arrival_step"][row]), int(r["first_scheduled_step"][row])
    if b <= a:
        return np.zeros(0)
    steps, rows, _, _ = trace.schedule_entries()
    during = (steps >= a) & (steps < b)
    counts = np.bincount(rows[during], minlength=trace.num_requests)
    return np.array([np.count_nonzero(counts), *np.sort(counts)[::-1][:4]], dtype=np.float64)


def _behind_head(trace: Trace, row: int) -> np.ndarray:
    """How many requests waited for their first step behind the request at ``row`` while it was next in line and
    not admitted (its "blocked" events): a request at the head of the queue holds up the ones behind it."""
    blocked = {e.step for e in trace.events if e.kind is EventKind.BLOCKED and e.row == row}
    if not blocked:
        return np.zeros(0)
    r = trace.requests
    first = np.where(r["first_scheduled_step"] < 0, np.iinfo(np.int64).max, r["first_scheduled_step"])
    behind = set()
    for step in blocked:
        behind.update(np.flatnonzero((r["arrival_step"] <= step) & (first > step)).tolist())
    behind.discard(row)
    return np.array([len(behind), len(blocked)], dtype=np.float64)


def _digest(scenario: Scenario) -> str:
    return str(hash(tuple(scenario.requests)))


def named_rows(sentence: str, request_ids: Sequence[str]) -> list[int]:
    """The rows of the requests ``sentence`` names (by id, as a whole word)."""
    out = []
    for row, rid in enumerate(request_ids):
        if rid in sentence and re.search(rf"(?<![\w]){re.escape(rid)}(?![\w])", sentence):
            out.append(row)
    return out


# ---- the universe of one page view --------------------------------------------------------------------------------

def _sorted_finite(values: Iterable[float] | np.ndarray) -> np.ndarray:
    a = np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=np.float64).ravel()
    return np.unique(a[np.isfinite(a)])


def _pairs(matrix: np.ndarray, op: str) -> np.ndarray:
    """Over the last axis of ``matrix`` [..., k]: every ordered pair's difference (abs) or ratio (a / b, b > 0),
    i != j."""
    a, b = matrix[..., :, None], matrix[..., None, :]
    k = matrix.shape[-1]
    off = ~np.eye(k, dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        values = np.abs(a - b) if op == "diff" else np.where(b > 0, a / b, np.nan)
    return values[..., off]


def _hit(sorted_values: np.ndarray, target: float, tol: float) -> bool:
    i = np.searchsorted(sorted_values, target - tol)
    return i < len(sorted_values) and sorted_values[i] <= target + tol


MAX_PAIRED_SWEEP_RUNS = 16  # a sweep's points pair with each other up to this many (see Universe)
MAX_POSITION_RUNS = 24  # "x% of the way from a to b" is looked for among at most this many runs' values of a figure


@dataclass
class Universe:
    """The figures of one page view: its runs' (``compared`` marks the runs the page compares side by side, the
    others are sweep points), and the derived figures allowed between them (module docstring)."""

    runs: Sequence[RunFigures]
    compared: Sequence[bool]
    base: np.ndarray = field(init=False)
    sizes: np.ndarray = field(init=False)
    diffs: np.ndarray = field(init=False)
    ratios: np.ndarray = field(init=False)
    same_figure: dict[str, np.ndarray] = field(init=False)

    def __post_init__(self) -> None:
        runs = list(self.runs)
        base = [np.fromiter(r.scalars.values(), dtype=np.float64, count=len(r.scalars)) for r in runs]
        base += [r.aggregates for r in runs] + [t.ravel() for t in self._same_users()] + self._at_lifts()
        self.base = _sorted_finite(np.concatenate(base))
        self.sizes = _sorted_finite(np.concatenate(
            [np.concatenate([r.token_figures * r.kv_bytes_per_token, r.block_figures * r.block_bytes])
             for r in runs]))
        diffs, ratios = [], []
        # the same figure of two runs: of the runs compared, and of a sweep's points among themselves (a sweep of a
        # hundred points, the sizing grid, pairs only with the compared runs: its differences would cover any number)
        keys = sorted({k for r in runs for k in r.scalars})
        matrix = np.array([[r.scalars.get(k, np.nan) for r in runs] for k in keys], dtype=np.float64).reshape(
            len(keys), len(runs))
        self.same_figure = {k: row[np.isfinite(row)] for k, row in zip(keys, matrix, strict=True)}
        shown = [i for i, c in enumerate(self.compared) if c]
        swept = [i for i, c in enumerate(self.compared) if not c]
        cols = shown + (swept if len(swept) <= MAX_PAIRED_SWEEP_RUNS else [])
        if len(cols) > 1:
            diffs.append(_pairs(matrix[:, cols], "diff"))
            ratios.append(_pairs(matrix[:, cols], "ratio"))
        for table in self._same_users():  # the same users' statistics under two runs
            diffs.append(_pairs(table, "diff"))
            ratios.append(_pairs(table, "ratio"))
        # two figures of one compared run in one unit (a share: wasted tokens of the output tokens)
        for i in shown:
            by_family: dict[str, list[float]] = {}
            for k, v in runs[i].scalars.items():
                by_family.setdefault(_family(k), []).append(v)
            for family, values in by_family.items():
                if family:
                    ratios.append(_pairs(np.array(values), "ratio"))
        self.diffs = _sorted_finite(np.concatenate([d.ravel() for d in diffs] or [np.zeros(0)]))
        self.ratios = _sorted_finite(np.concatenate([d.ravel() for d in ratios] or [np.zeros(0)]))
        self._named: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def _same_requests(self) -> list[list[RunFigures]]:
        """The compared runs grouped by their request list (two or more runs of the same requests)."""
        by_digest: dict[str, list[RunFigures]] = {}
        for r, c in zip(self.runs, self.compared, strict=True):
            if c:
                by_digest.setdefault(r.request_digest, []).append(r)
        return [g for g in by_digest.values() if len(g) > 1]

    def _same_users(self) -> list[np.ndarray]:
        """Over the users served under every compared run of one request list (a comparison over the same users):
        their number and each latency's mean and max, a row per statistic and a column per run."""
        out = []
        for group in self._same_requests():
            everyone = np.logical_and.reduce([r.served for r in group])
            if not everyone.any():
                continue
            stats = [[float(everyone.sum())] * len(group)]
            for name in group[0].per_request:
                if name.startswith("latency.") or "-" in name:
                    values = [r.per_request[name][everyone] for r in group]
                    stats += [[float(np.nanmean(v)) if np.isfinite(v).any() else np.nan for v in values],
                              [float(np.nanmax(v)) if np.isfinite(v).any() else np.nan for v in values]]
            out.append(np.array(stats, dtype=np.float64))
        return out

    def _at_lifts(self) -> list[np.ndarray]:
        """Every client's virtual counter, and the gaps between them, in each compared run as a VTC run's largest
        lift began (the step before it): where a returning client stood against the others, lift or no lift."""
        steps = {int(r.scalars["fairness.lifts.step"]) for r in self.runs if "fairness.lifts.step" in r.scalars}
        out = []
        for r, c in zip(self.runs, self.compared, strict=True):
            if not c or not steps or not len(r.trace.client_ids) or not r.trace.num_steps:
                continue
            counters = r.trace.clients["client_counters"]
            for step in steps:
                if step <= r.trace.num_steps:
                    row = counters[max(step - 1, 0)]
                    out += [row, _pairs(row, "diff")]
        return out

    def _of_named(self, sentence: str) -> tuple[np.ndarray, np.ndarray]:
        """(figures, sizes) of the requests ``sentence`` names, in every run."""
        if sentence not in self._named:
            figures, sizes = [np.zeros(0)], [np.zeros(0)]
            for r in self.runs:
                rows = named_rows(sentence, r.request_ids)
                if rows:
                    figures.append(r.request_figures(rows))
                    sizes.append(r.request_sizes(rows))
            self._named[sentence] = (_sorted_finite(np.concatenate(figures)), _sorted_finite(np.concatenate(sizes)))
        return self._named[sentence]

    # ---- matching ----
    def explain(self, q: Quoted, sentence_quotes: Sequence[Quoted] = (), sentence: str = "") -> str | None:
        """How ``q`` is a figure of these runs (a word for the test's report), or None if it is not."""
        v, tol = q.value, q.tol
        named, named_sizes = self._of_named(sentence) if sentence else (np.zeros(0), np.zeros(0))
        if q.kind == "bytes":
            if _hit(self.sizes, v, tol) or _hit(named_sizes, v, tol):
                return "size"
            return "size of quoted" if self._quoted_size(q, sentence_quotes) else None
        if q.kind in ("percent", "times"):
            if _hit(self.base, v, tol):
                return "figure"
            targets = [v] if q.kind == "times" else [v, 1 + v, 1 - v]
            if any(t > 0 and _hit(self.ratios, t, tol) for t in targets):
                return "ratio"
            if self._quoted_ratio(q, sentence_quotes, targets):
                return "ratio of quoted"
            if q.kind == "percent" and self._position(v, tol):
                return "position"
            return None
        if q.negative:  # a count or a time below zero ("waited -2 steps") is only a figure if one is negative
            return "figure" if _hit(self.base, -v, tol) or _hit(named, -v, tol) else None
        if _hit(self.base, v, tol):
            return "figure"
        if _hit(named, v, tol):
            return "figure of a request named"
        if any(_hit(self.base, v + k, tol) or _hit(named, v + k, tol) for k in range(1, q.listed + 1)):
            return "the rest of a list"
        if _hit(self.diffs, v, tol):
            return "difference"
        if self._quoted_diff(q, sentence_quotes):
            return "difference of quoted"
        return None

    def _quoted_size(self, q: Quoted, quotes: Sequence[Quoted]) -> bool:
        """A size of a count the sentence quotes (tokens x KV bytes per token, blocks x a block's bytes)."""
        scales = {s for r in self.runs for s in (r.kv_bytes_per_token, r.block_bytes)}
        return any(abs(o.value * s - q.value) <= q.tol + o.tol * s for o in quotes if o.kind == "plain"
                   for s in scales)

    @staticmethod
    def _quoted_ratio(q: Quoted, quotes: Sequence[Quoted], targets: Sequence[float]) -> bool:
        others = [o for o in quotes if o is not q and o.kind in ("plain", "bytes") and o.value > 0]
        for a in others:
            for b in others:
                if a is b or a.kind != b.kind:
                    continue
                r = a.value / b.value
                # the quoted figures are rounded: their own rounding carries into the ratio
                slack = q.tol + r * (a.tol / a.value + b.tol / b.value)
                if any(abs(r - t) <= slack for t in targets):
                    return True
        return False

    @staticmethod
    def _quoted_diff(q: Quoted, quotes: Sequence[Quoted]) -> bool:
        others = [o for o in quotes if o is not q and o.kind == q.kind]
        return any(abs(abs(a.value - b.value) - q.value) <= q.tol + a.tol + b.tol
                   for i, a in enumerate(others) for b in others[i + 1:])

    def _position(self, p: float, tol: float) -> bool:
        """(c - a) / (b - a) = p for one figure of three runs."""
        for values in self.same_figure.values():
            if len(values) < 3:
                continue
            v = np.unique(values)[:MAX_POSITION_RUNS]
            a, b, c = v[:, None, None], v[None, :, None], v[None, None, :]
            with np.errstate(divide="ignore", invalid="ignore"):
                pos = (c - a) / (b - a)
            if np.any(np.abs(pos - p) <= tol):
                return True
        return False


def lesson_constants(module: Any) -> dict[str, float]:
    """A lesson module's named numeric constants (``KNEE_FACTOR = 1.5``): the thresholds its sentences state, and
    the fields of a named tuple of them (``PAPER_RATE_LIMIT``: a paper's figures, quoted beside the runs')."""
    out = {}
    for k, v in vars(module).items():
        if not k.isupper() or isinstance(v, bool):
            continue
        if isinstance(v, int | float):
            out[f"const.{k}"] = float(v)
        elif isinstance(v, tuple) and hasattr(v, "_asdict"):
            out.update({f"const.{k}.{f}": float(x) for f, x in v._asdict().items()
                        if isinstance(x, int | float) and not isinstance(x, bool)})
    return out


def package_constants(lesson_id: str) -> dict[str, float]:
    """``lesson_constants`` of every module of a lesson's free page: ``lesson.py`` and the modules of its package
    beside it (``notices.py``, ``stats.py``, ...), not its guided path's or its problems' (their figures are not the
    free page's)."""
    package = importlib.import_module(f"lessons.{lesson_id}")
    names = [m.name for m in pkgutil.iter_modules(package.__path__) if m.name not in ("guide", "problems")]
    out: dict[str, float] = {}
    for name in sorted(names):
        out.update(lesson_constants(importlib.import_module(f"lessons.{lesson_id}.{name}")))
    return out


# ---- one view's check (what a worker process runs: a pure function of the view) -----------------------------------

@dataclass(frozen=True)
class ViewNotices:
    """What a page view showed: its "what to notice" sentences, the scenarios it ran (scenario key, scenario,
    compared side by side), the names on the page, and the lesson's constants."""

    view: str
    runs: tuple[tuple[str, Scenario, bool], ...]
    sentences: tuple[str, ...]
    names: frozenset[str]
    constants: tuple[tuple[str, float], ...]


FRESH_CACHE_RUNS = 160  # fresh runs' figures kept for the next views (most views share runs with the preset's)
_FRESH: OrderedDict[str, RunFigures] = OrderedDict()


def fresh_figures(key: str, scenario: Scenario, constants: dict[str, float]) -> RunFigures:
    """The figures of a fresh run of ``scenario`` (``key``: its ui.runner.scenario_key), kept for the next views."""
    if key in _FRESH:
        _FRESH.move_to_end(key)
        return _FRESH[key]
    figures = run_figures(scenario, simulate(scenario.config, list(scenario.requests)), constants)
    _FRESH[key] = figures
    while len(_FRESH) > FRESH_CACHE_RUNS:
        _FRESH.popitem(last=False)
    return figures


def check_notices(v: ViewNotices) -> list[tuple[str, str]]:
    """(sentence, problem) for every number of ``v``'s sentences that is no figure of fresh runs of its
    scenarios."""
    constants = dict(v.constants)
    figures = [fresh_figures(key, scenario, constants) for key, scenario, _ in v.runs]
    universe = Universe(figures, [compared for _, _, compared in v.runs])
    out = []
    for sentence in v.sentences:
        quotes = quoted_numbers(sentence, v.names)
        out += [(sentence, f"{q.text!r} is no figure of the runs") for q in quotes
                if universe.explain(q, quotes, sentence) is None]
        out += [(sentence, problem) for problem in direction_problems(sentence, quotes)]
        if missing := _MISSING.search(sentence):
            out.append((sentence, f"quotes a missing figure ({missing.group()!r})"))
    return out
