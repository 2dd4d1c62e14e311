"""The Fairness lesson's "what to notice" sentences, each computed from the runs' numbers (``stats.py``): the light
client's wait, what a rate limit costs (beside the VTC paper's figure in the paper's setting), VTC's lift, weights,
the service gap against VTC's bound, the fair-share index, and the sweeps'. ``lesson.notices`` puts them in the
page's order."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from sim import fairness_metrics, metrics, presets
from sim.config import EngineConfig, Policy
from sim.trace import Trace
from ui.wording import count, join_and, pct_change, safe_id, safe_ids

from .stats import FAIRNESS_WINDOW_STEPS, VTC_LIKE, Run, light_client

LIFT_NOTICE_SHARE = 0.05  # a lift worth a sentence: at least this share of the largest counter


class PaperRateLimit(NamedTuple):
    """Total throughput a paper measured without and with a per-client rate limit (tokens/s, read off its figure)."""

    unlimited_tok_s: float
    limited_tok_s: float

    @property
    def kept(self) -> float:
        """The share of the throughput the limit kept."""
        return self.limited_tok_s / self.unlimited_tok_s


# The VTC paper's rate-limit figure (Sheng et al., "Fairness in Serving Large Language Models", OSDI 2024): ~780
# tokens/s without a limit, ~340 with one, ~44% kept, on the paper's own model and GPU. The article_fairness
# preset reproduces its shape, not its tokens/s (its step costs are sim.config.CostModel's: a fit of vLLM serving
# Llama 3.1 8B on one H100).
PAPER_RATE_LIMIT = PaperRateLimit(unlimited_tok_s=780.0, limited_tok_s=340.0)
PAPER_PRESET = "article_fairness"  # the preset whose FCFS and "Rate limit" runs the paper's figure is compared with


def limit_text(config: EngineConfig) -> str:
    n = config.rate_limit_max_requests
    return f"{n} request{'s' if n != 1 else ''} per client per {config.rate_limit_window_steps:,} steps"


def _fcfs_baseline(runs: Sequence[Run]) -> Run | None:
    return next((r for r in runs if r.config.policy is Policy.FCFS and not r.is_limited), None)


def fmt_ms(value: float) -> str:
    return f"{value:,.0f} ms" if np.isfinite(value) else "—"


def _pct_change(a: float, b: float) -> str:
    return pct_change(a, b) if np.isfinite(a) and np.isfinite(b) and a > 0 else ""


def light_client_notice(runs: Sequence[Run]) -> list[str]:
    base = _fcfs_baseline(runs)
    if base is None:
        return []
    c = light_client(base)
    if c is None:
        return []
    name = safe_id(base.clients[c]["client"])  # (an uploaded file's id: Markdown shown as typed)
    share = base.clients[c]["num_requests"] / sum(row["num_requests"] for row in base.clients)
    a = base.clients[c]["mean_finish_ms"]
    if not np.isfinite(a):  # none of its requests was served (each too large for the pool, say): no time to compare
        return []
    if len(base.clients) == 2:
        heavy = safe_id(base.clients[1 - c]["client"])
        theirs, behind = f"{heavy}'s", f"the {heavy} requests that arrived before it"
    else:
        theirs, behind = "the other clients'", "the other clients' requests that arrived before it"
    out = [f"Under {base.label}, {name} sends only {share:.0%} of the requests"
           + _light_client_wait(base, c, a, _others_mean_finish_ms(base.trace, c), theirs, behind)]
    for run in runs:
        if run is base or c >= len(run.clients):
            continue
        b = run.clients[c]["mean_finish_ms"]
        change = _pct_change(a, b)
        rejected = run.clients[c]["num_rejected"]
        tail = ("." if not run.is_limited else f", with {rejected:,} of {name}'s requests rejected." if rejected
                else f", with none of {name}'s requests rejected.")
        if not np.isfinite(b):
            out.append(f"{run.label}: none of {name}'s requests was served{tail}")
        elif fmt_ms(a) == fmt_ms(b):
            out.append(f"{run.label}: {name}'s mean finish time stayed at {fmt_ms(a)}{tail}")
        else:
            out.append(f"{run.label}: {name}'s mean finish time {'fell' if b < a else 'rose'} from {fmt_ms(a)} to "
                       f"{fmt_ms(b)} ({change}){tail}")
    return out


def _others_mean_finish_ms(trace: Trace, c: int) -> float:
    """The mean finish time (ms) of the served requests of every client but ``c``, pooled: how long "the other
    clients'" requests took. (Not the mean of their means, which weighs a light client's few requests like a heavy
    one's many; with two clients the same as the other client's own mean.)"""
    served = metrics.served_mask(trace) & (trace.requests["client"] != c)
    finish = metrics.request_latencies(trace)["finish_ms"][served]
    return float(finish.mean()) if len(finish) else float("nan")


def _light_client_wait(base: Run, c: int, mine_ms: float, theirs_ms: float, theirs: str, behind: str) -> str:
    """The rest of the light-client sentence: how its wait compares with the others', and why, by the run."""
    r = base.trace.requests
    light = r["client"] == c
    queued = light & (r["first_scheduled_step"] > r["arrival_step"])
    # Queued behind the others only if some other client's request arrived before one that queued.
    behind_others = queued.any() and (r["arrival_step"][~light] <= r["arrival_step"][queued].max()).any()
    why = (f"each one queues behind {behind}" if behind_others else
           "they queued only behind each other" if queued.any() else
           "none of them queues here, so this is simply how long such answers take")
    p99 = fmt_ms(base.clients[c]["p99_finish_ms"])
    if not np.isfinite(theirs_ms):  # the others had nothing served: nothing to compare with
        return f", and they took {fmt_ms(mine_ms)} on average (p99 {p99}), while none of {theirs} requests was served."
    if mine_ms >= 0.8 * theirs_ms:  # the article's point: a trickle waits as long as the flood
        how = "as long as" if mine_ms <= 1.25 * theirs_ms else "longer than"
        return f", yet they took {fmt_ms(mine_ms)} on average (p99 {p99}), {how} {theirs} ({fmt_ms(theirs_ms)}): {why}."
    return f"; they took {fmt_ms(mine_ms)} on average (p99 {p99}) against {theirs} {fmt_ms(theirs_ms)}: {why}."


def throughput_notice(runs: Sequence[Run]) -> list[str]:
    base = _fcfs_baseline(runs)
    if base is None:
        return []
    t0 = base.summary["throughput_tok_s"]
    if not t0 > 0:  # the baseline served nothing (every request too big for the pool): nothing to compare with
        return []
    seqs = base.config.max_num_seqs
    out = []
    for run in runs:
        if run is base:
            continue
        t = run.summary["throughput_tok_s"]
        if run.is_limited:
            rejected = ", ".join(f"{c['num_rejected']:,} of {safe_id(c['client'])}'s"
                                 for c in sorted(run.clients, key=lambda c: c["client"]))
            turned_away = count(run.summary["num_rejected"], "request")
            head = f"The rate limit ({limit_text(run.config)}) turned away {turned_away} ({rejected})"
            if not run.summary["num_rejected"]:
                out.append(f"The rate limit ({limit_text(run.config)}) never turned a request away: at this limit "
                           f"nobody sends faster than allowed, and it changes nothing ({t:,.0f} tokens/s, "
                           f"{t / t0:.0%} of {base.label}'s).")
            elif t < 0.95 * t0:
                kv = run.summary["mean_kv_occupancy"]
                spare = (f" while the GPU had room to spare (the KV pool {kv:.0%} full on average)" if kv < 0.75
                         else "")
                out.append(f"{head} and kept only {run.stats['mean_batch']:.1f} of {count(seqs, 'batch slot')} busy "
                           f"on average: throughput fell from {t0:,.0f} to {t:,.0f} tokens/s ({t / t0:.0%} of "
                           f"{base.label}'s){spare}.")
                out += _paper_notice(base, run)
            else:
                out.append(f"{head}, yet throughput stayed at {t:,.0f} tokens/s ({t / t0:.0%} of {base.label}'s): "
                           f"what holds the server back is {_bottleneck(base)}, not the limit.")
        elif run.config.policy in VTC_LIKE and any(r.is_limited for r in runs):
            line = (f"{run.label} kept {t:,.0f} tokens/s ({t / t0:.0%} of {base.label}'s {t0:,.0f}) and rejected "
                    f"nothing")
            c = light_client(run)
            if c is not None:
                tokens = [row["output_tokens"] for row in run.clients]
                heavy = 1 - sum(tokens[c:c + 1]) / max(sum(tokens), 1)
                line += (f": {run.clients[c]['client']} got all it asked for and the others used the rest "
                         f"({heavy:.0%} of the tokens)")
                if run.stats["idle_slot_share"] < 0.01:
                    line += "; it never left a batch slot empty while a request waited"
            out.append(line + ".")
    return out


def _paper_notice(base: Run, limited: Run) -> list[str]:
    """The VTC paper's rate-limit figure beside the simulator's, when ``base`` (FCFS) and ``limited`` are the
    paper preset's own two runs (``is_paper_setting``); otherwise nothing: the paper's figure is not comparable."""
    if not is_paper_setting(base, limited):
        return []
    t0, t = base.summary["throughput_tok_s"], limited.summary["throughput_tok_s"]
    paper = PAPER_RATE_LIMIT
    return [f"The VTC paper measured a fall from ~{paper.unlimited_tok_s:,.0f} to ~{paper.limited_tok_s:,.0f} "
            f"tokens/s with its rate limit; the simulator's {t0:,.0f} and {t:,.0f} tokens/s come from its own cost "
            f"model (per-step ms costs fitted to Llama 3.1 8B on one H100), not the paper's model and GPU: compare "
            f"the share kept ({t / t0:.0%} here, ~{paper.kept:.0%} in the paper), not the tokens/s."]


def is_paper_setting(base: Run, limited: Run) -> bool:
    """Whether ``base`` and ``limited`` run the paper preset's FCFS and "Rate limit" settings: the same requests
    and the same engine config (pool, slots, budget, costs, the rate limit and its window), VTC's charges aside
    (neither run is ordered by them). Knobs that move any of these away from the preset make it False."""
    ref = _paper_setting()
    return all(run.scenario.requests == ref.requests and _without_charges(run.config) == config
               for run, config in ((base, ref.unlimited), (limited, ref.limited)))


class _PaperSetting(NamedTuple):
    requests: tuple
    unlimited: EngineConfig  # the preset's FCFS run, VTC's charges reset
    limited: EngineConfig  # its "Rate limit" run, likewise


@functools.cache
def _paper_setting() -> _PaperSetting:
    p = presets.get(PAPER_PRESET)
    configs = {label: _without_charges(p.scenario.config.replace(**ov)) for label, ov in p.variants}
    return _PaperSetting(p.scenario.requests, configs["FCFS"], configs["Rate limit"])


def _without_charges(config: EngineConfig) -> EngineConfig:
    default = EngineConfig()
    return config.replace(input_weight=default.input_weight, output_weight=default.output_weight,
                          client_weights=default.client_weights)


def _bottleneck(run: Run) -> str:
    """What limits ``run``'s throughput, for a sentence: its batch slots, its KV pool, or the load."""
    seqs, busy, kv = run.config.max_num_seqs, run.stats["mean_batch"], run.summary["mean_kv_occupancy"]
    if busy >= 0.9 * seqs:
        return f"the batch slots ({busy:.1f} of {count(seqs, 'slot')} busy on average even under {run.label})"
    if kv >= 0.8:
        return f"the KV pool ({kv:.0%} full on average even under {run.label})"
    return (f"the load (under {run.label} itself only {busy:.1f} of {count(seqs, 'slot')} were busy and the KV pool "
            f"{kv:.0%} full on average)")


def lift_notice(runs: Sequence[Run]) -> list[str]:
    vtc = next((r for r in runs if r.config.policy is Policy.VTC and r.stats["lifts"]["count"]
                and r.stats["lifts"]["amount"] >= LIFT_NOTICE_SHARE * r.stats["max_counter"]), None)
    lcf = next((r for r in runs if r.config.policy is Policy.LCF), None)
    out = []
    if vtc is not None:
        lift = vtc.stats["lifts"]
        ids = safe_ids(vtc.stats["client_ids"])
        who, after = ids[lift["client"]], lift["after"]
        # The lift's target: the lowest counter among the clients with requests waiting then (name that client,
        # and any whose counter was lower still but had nothing waiting, so did not count), or, with nobody
        # waiting, the counter of the last client whose requests left the queue (the paper's Algorithm 2).
        tol = 1e-6 * max(1.0, abs(after))
        me = lift["client"]
        others = [(ids[c], v, lift["waiting"][c]) for c, v in enumerate(lift["others"]) if c != me]
        target = join_and([name for name, v, _ in others if abs(v - after) <= tol])
        anyone_waiting = any(w for _, _, w in others)
        idle = join_and([name for name, v, _ in others if v < after - tol]) if anyone_waiting else ""
        if not target:
            rule = ""
        elif anyone_waiting:
            rule = f", {target}'s, the lowest among the clients with requests waiting"
        else:
            rule = f", {target}'s: nobody else was waiting, and {target} was the last client to leave the queue"
        # Its counter was low because it had been idle, or (its queue had only just emptied, with requests still
        # running) because its charges came in more slowly (per token) than the others' (per prompt).
        why = (f"the credit {who} 'saved' while idle" if not lift["running"][me] else
               f"{who}'s lower counter (its queue had only just emptied, with requests still running)")
        out.append(f"{vtc.label} lifted a returning client's counter {count(lift['count'], 'time')}. The largest: "
                   f"at step {lift['step']:,} {who}'s counter went from {lift['before']:,.0f} to {after:,.0f}"
                   + rule + (f" ({idle}, lower, had none waiting)" if idle else "")
                   + f", so {why} could not be spent at "
                   + (f"{ids[1 - me]}'s" if len(ids) == 2 else "the others'") + " expense.")
    if vtc is not None and lcf is not None:
        ids = safe_ids(vtc.stats["client_ids"])
        who = vtc.stats["lifts"]["client"]
        victims = [c for c in range(len(ids)) if c != who]
        worst = max(victims, key=lambda c: lcf.stats["longest_starvation_steps"][c])
        head = lcf.trace.clients["client_counters"]
        step = vtc.stats["lifts"]["step"]
        if step < lcf.trace.num_steps:
            lead = float(head[max(step - 1, 0), worst] - head[max(step - 1, 0), who])
            out.append(f"Without the lift ({lcf.label}) {ids[who]} came back {lead:,.0f} weighted tokens 'behind' "
                       f"and was served first until it caught up: {ids[worst]} had requests waiting and none "
                       f"admitted for up to {lcf.stats['longest_starvation_steps'][worst]:,} steps, against "
                       f"{vtc.stats['longest_starvation_steps'][worst]:,} under {vtc.label}.")
    return out


def weights_notice(runs: Sequence[Run]) -> list[str]:
    weighted = [r for r in runs if len({r.config.client_weight(c) for c in r.stats["client_ids"]}) > 1]
    if not weighted or len(runs[0].stats["client_ids"]) != 2:
        return []
    a, b = safe_ids(runs[0].stats["client_ids"])
    ratios = []
    for run in runs:
        tokens = run.stats["tokens_all_waiting"]
        if run.stats["all_waiting_share"] >= 0.05 and tokens[0]:
            ratios.append((tokens[1] / tokens[0], run.label))
    if not ratios:
        return []
    (first, label), rest = ratios[0], [f"{r:.2f}x under {lab}" for r, lab in ratios[1:]]
    listed = join_and([f"{first:.2f}x the tokens (prompt + output) {a} was under {label}", *rest])
    return [f"While both {a} and {b} had requests waiting, {b} was served {listed}: weighted VTC splits the service "
            f"by the weights; FCFS by who sent more."]


def gap_notice(runs: Sequence[Run]) -> list[str]:
    ids = runs[0].stats["gap_clients"]
    if len(ids) < 2:
        return []
    a, b = safe_ids(ids[:2])  # (for the sentences; ids stay as the trace has them)
    measured = [r for r in runs if r.stats["gap"] > 0]
    if not measured:
        return [f"{a} and {b} never had requests waiting at the same time, so no service gap arises."]
    cfg = measured[0].config
    trace = measured[0].trace
    parts = fairness_metrics.vtc_bound_parts(trace, [trace.client_ids.index(c) for c in ids[:2]])
    gaps = ", ".join(f"{r.label} {r.stats['gap']:,.0f}" for r in measured)
    over = [r for r in measured if r.stats["gap"] > r.stats["bound"]]
    tail = (f"; {', '.join(r.label for r in over)} went past it" if over else "")
    # The paper's server reserves memory for every admitted request's whole answer, so nothing is preempted; a
    # server that preempts (as vLLM does, the newest admission first: often the least-served client's) can break it.
    vtc_over = [r for r in over if r.config.policy in VTC_LIKE and r.summary["num_preemptions"]]
    if vtc_over:
        n = vtc_over[0].summary["num_preemptions"]
        tail += (f" ({vtc_over[0].label} preempted {count(n, 'request')}: the paper's bound assumes a server that "
                 f"never preempts, reserving memory for each answer's full length)")
    formula, numbers = "2 x max(w_in x L_input, w_out x M)", (f"2 x max({cfg.input_weight:g} x "
                                                            f"{parts['max_input']:,}, {cfg.output_weight:g} x "
                                                            f"{parts['pool_tokens']:,})")
    if parts["min_weight"] != 1:  # charges are divided by the client's weight: so is one charge's largest size
        formula += " / w_min"
        numbers += f" / {parts['min_weight']:g}"
    return [f"Largest service gap between {a} and {b} while both waited (weighted tokens): {gaps}. "
            f"VTC guarantees at most {formula} = {numbers} = {parts['bound']:,.0f}{tail}."]


def fair_index_notice(runs: Sequence[Run]) -> list[str]:
    values = [(r.label, r.stats["fair_index"]) for r in runs if np.isfinite(r.stats["fair_index"])]
    if len(values) < 2:
        return []
    text = ", ".join(f"{label} {v:.2f}" for label, v in values)
    base = _fcfs_baseline(runs)
    floor = base.stats["fair_index"] if base is not None and np.isfinite(base.stats["fair_index"]) else 1.0
    limited = [r.label for r in runs if r.is_limited and np.isfinite(r.stats["fair_index"])
               and r.stats["fair_index"] > 0.95 and r.stats["fair_index"] > floor + 0.02
               and r.summary["num_rejected"]]
    tail = (f" {limited[0]} scores well only because it turned the extra work away." if limited else "")
    return [f"Jain's index against each client's max-min fair share (1 = everyone got their share, "
            f"{FAIRNESS_WINDOW_STEPS}-step windows): {text}.{tail}"]


# ---- the sweeps' -----------------------------------------------------------------------------------------------
def limit_sweep_notice(sweep: dict, runs: Sequence[Run]) -> list[str]:
    base = _fcfs_baseline(runs)
    if base is None or not sweep["points"] or not base.summary["throughput_tok_s"] > 0:  # (it served nothing)
        return []
    t0 = base.summary["throughput_tok_s"]
    x, pts = sweep["x"], sweep["points"]
    tightest = pts[0]
    n = x[0]
    out = [f"At the tightest limit ({n} request{'s' if n != 1 else ''} per client per {sweep['window_steps']:,} "
           f"steps) throughput is "
           f"{tightest['throughput']:,.0f} tokens/s, {tightest['throughput'] / t0:.0%} of {base.label}'s "
           f"{t0:,.0f}, with {tightest['num_rejected']:,} requests rejected."]
    near = next((v for v, p in zip(x, pts, strict=True) if p["throughput"] >= 0.9 * t0), None)
    if near is not None:
        p = pts[x.index(near)]
        total = base.summary["num_requests"]
        if p["num_rejected"] <= 0.05 * total:
            out.append(f"Only from {near} requests per window does throughput get within 10% of {base.label}'s; by "
                       f"then the limit barely holds anyone back ({p['num_rejected']:,} of {total:,} rejected), so "
                       f"it no longer protects the light client either.")
        else:
            out.append(f"Only from {near} requests per window does throughput get within 10% of {base.label}'s, "
                       f"and even there it rejects {p['num_rejected']:,} of {total:,} requests.")
    else:
        out.append(f"No limit tried gets within 10% of {base.label}'s throughput: every one of them turns work away "
                   f"while slots sit empty.")
    return out


def weight_sweep_notice(sweep: dict, runs: Sequence[Run]) -> list[str]:
    pts, x = sweep["points"], sweep["x"]
    if len(pts) < 2 or len(pts[0]["client_ids"]) < 2:
        return []
    ids = safe_ids(pts[0]["client_ids"])
    first, last = pts[0]["mean_finish_ms"], pts[-1]["mean_finish_ms"]
    raising = f"Raising the output weight from {x[0]:g} to {x[-1]:g} (input weight {sweep['input_weight']:g})"
    out = []
    comparable = bool(np.isfinite([*first, *last]).all())  # (a client with nothing served: no times to compare)
    if comparable and all(fmt_ms(a) == fmt_ms(b) for a, b in zip(first, last, strict=True)):
        stay = ", ".join(f"{c} {fmt_ms(first[i])}" for i, c in enumerate(ids))
        out = [f"{raising} changes nothing here: every client's mean finish time stays the same ({stay}). VTC "
               f"reorders requests only while clients wait for each other, and here the order did not change."]
    elif comparable:
        moves = "; ".join(f"{c}'s mean finish time goes from {fmt_ms(first[i])} to {fmt_ms(last[i])}"
                          for i, c in enumerate(ids))
        # The lesson's point holds when the client that waits longer is the one with the most output per token.
        rose = max(range(len(ids)), key=lambda i: last[i] - first[i])
        shares = fairness_metrics.output_token_share(runs[0].trace) if runs else {}
        holds = last[rose] > first[rose] and shares and max(shares, key=shares.get) == ids[rose]
        out = [f"{raising} moves the waiting between clients: {moves}."
               + (" Whoever consumes the expensive kind of token counts as served sooner and waits longer."
                  if holds else "")]
    vtc = next((r for r in runs if r.config.policy in VTC_LIKE), None)
    if vtc is not None and len(vtc.clients) >= 2:
        cost = fairness_metrics.mean_request_charge(vtc.trace)
        cfg = vtc.config
        out.append(f"Mean charge per request at your weights (in {cfg.input_weight:g} : out {cfg.output_weight:g}): "
                   + ", ".join(f"{safe_id(c)} {v:,.0f} weighted tokens" for c, v in cost.items()) + ".")
    return out
