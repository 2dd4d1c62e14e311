"""The Cancellation lesson's "what to notice" sentences, computed from the runs (``measures.py``): the article's
story, tokens nobody read, useful throughput, the waiting others lose, KV held for nobody, late detection, timeouts
and stop checks. ``lesson.notices`` puts them in the page's order."""

from __future__ import annotations

import numpy as np

from lessons.run import Run
from sim.config import StopCheck
from sim.request import NO_STEP, RequestStatus, StopType
from ui.wording import count, join_and, pct_change, safe_id

from .measures import Story, anyone_left, mb, peak_kv_for_nobody, stayed_under_every_server, timed_out, waiting_of


def story_sentences(s: Story) -> list[str]:
    cfg = s.config
    out = [f"Without an abort the engine generated {s.wasted_tokens:,} tokens for nobody after the user left at "
           f"token {s.tokens_read:,}, and {safe_id(s.request_id)}'s KV grew to {s.end_kv_tokens:,} tokens = "
           f"{mb(s.end_kv_tokens, cfg):,.0f} MB ({count(s.end_blocks, 'block')} of {cfg.block_size} tokens)."]
    freed = (f"With an abort, the {s.freed_kv_tokens:,} tokens of KV it held ({mb(s.freed_kv_tokens, cfg):,.0f} MB) "
             f"were freed at step {s.abort_step:,}, the very next step after the user's last token")
    if s.waiter_id is not None:
        freed += (f", and {safe_id(s.waiter_id)} started at step {s.waiter_start_abort:,} instead of "
                  f"{s.waiter_start_no_abort:,}: {s.earlier_steps:,} steps earlier")
    return out + [freed + "."]


def waste_sentences(runs: list[Run]) -> list[str]:
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


def useful_throughput_sentence(runs: list[Run]) -> list[str]:
    if len(runs) < 2:
        return []
    good = {r.label: r.summary["read_tok_s"] for r in runs if np.isfinite(r.summary["read_tok_s"])}
    if len(good) < 2:
        return []
    best, worst = max(good, key=good.get), min(good, key=good.get)
    if good[best] <= 0 or (good[best] - good[worst]) / good[best] < 0.01:
        return []
    # (not "goodput", which in serving papers counts requests per second that meet a latency target)
    return [f"Useful throughput (tokens somebody read, per second of the run): {good[best]:,.0f} tokens/s with {best}, "
            f"{good[worst]:,.0f} with {worst} ({pct_change(good[best], good[worst])})."]


def waiting_sentences(runs: list[Run], unit: str) -> list[str]:
    """How much longer the users who stayed queued under each server than under the first, over the same users."""
    stayed = stayed_under_every_server(runs)
    if stayed is None or not stayed.any():
        return []
    waits = {label: w[f"queue_{unit}"]["mean"] for label, w in waiting_of(runs, stayed).items()}
    first = runs[0]
    a = waits[first.label]
    one = stayed.sum() == 1
    every = "both" if len(runs) == 2 else "every server"
    if not anyone_left(runs):
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


def kv_sentence(runs: list[Run]) -> list[str]:
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


def late_sentences(runs: list[Run]) -> list[str]:
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


def timeout_sentences(runs: list[Run]) -> list[str]:
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


def stop_sentences(runs: list[Run]) -> list[str]:
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


def _percent(share: float) -> str:
    """A share for a sentence: whole percents, one decimal below 1% so a small waste never reads as 0%."""
    return f"{share:.1%}" if 0 < share < 0.01 else f"{share:.0%}"
