"""The Preemption page's sections past its timeline and KV charts, drawn from the lesson's runs: what bringing a
victim back costs (recompute vs swap), the prefix cache's hits on re-prefill, and the sizing heatmaps (pool size x
max_num_seqs). The numbers and words are the lesson's (``lessons/preemption/``: ``costs.py``, ``sizing.py``,
``lesson.py``); this module lays them out with Streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

from lessons.preemption import costs, lesson, sizing
from sim.config import EngineConfig

from . import page, theme
from .charts import preemption as charts
from .theme import ChartStyle
from .wording import fmt_gib


def cost(runs: Sequence[lesson.Run], config: EngineConfig, style: ChartStyle) -> None:
    """Recompute vs swap for the victim the lesson picks: cards, a caption and the bars."""
    st.subheader("What bringing a victim back costs: recompute vs swap")
    victim = costs.victim_cost(runs, config)
    if victim is None:
        st.caption("No request could run on this engine (each was too big for the pool), so there is no victim to "
                   "bring back.")
        return
    victim_cost, what = victim
    page.cards(costs.cost_cards(victim_cost, config))
    st.caption(costs.cost_caption(victim_cost, config, what))
    page.show_chart(charts.cost_bars(victim_cost, style, bandwidth_gb_s=config.cost.swap_bandwidth_gb_s),
                    "preemption-recompute-vs-swap", style)


def prefix_hits(runs: Sequence[lesson.Run], style: ChartStyle) -> None:
    """Each re-admission's prefill, split into the tokens the prefix cache still held and those prefilled again
    (nothing when no run re-admitted a recomputed request; a hint to turn prefix caching on when it is off)."""
    with_hits = [r for r in runs if lesson.readmissions(r.preempted)]
    if not with_hits:
        return
    st.subheader("Re-prefill and the prefix cache")
    if not any(r.trace.config.enable_prefix_caching for r in runs):
        n = sum(len(lesson.readmissions(r.preempted)) for r in runs)
        each = "the one re-admission" if n == 1 else f"each of the {n:,} re-admissions"
        st.caption(f"Prefix caching is off here (vLLM V1 turns it on by default), so {each} prefilled all its "
                   "tokens again. Turn it on in the sidebar to see how much a re-prefill finds in the cache.")
        return
    st.caption("A recomputed request's freed blocks keep their contents until the pool hands them out again: with "
               "prefix caching on, the re-admission reuses the ones still cached (and any prefix shared with "
               "running requests) and prefills only the rest.")
    by_label = {r.label: r for r in with_hits}

    def draw(label: str) -> None:
        page.show_chart(charts.reprefill_hits(lesson.readmissions(by_label[label].preempted), style, title=label),
                        f"preemption-hits-{label}", style)

    page.grid(list(by_label), draw, columns=1 if len(with_hits) == 1 else 2)


def sizing_heatmaps(sweep: sizing.Sweep, config: EngineConfig, style: ChartStyle) -> None:
    """Preemptions and mean finish time over the sizing grid, the cell of the reader's setting outlined; the
    sweep's notices once every point is in."""
    pool = lesson.pool_gib(config)
    i, j, exact = sizing.nearest_cell(sweep, pool, config.max_num_seqs)
    # (presentation mode: one under the other; half a projector's width runs the larger cell numbers together)
    left, right = (st.container(), st.container()) if style.presentation else st.columns(2)
    with left:
        page.show_chart(charts.sweep_heatmap(
            sweep.pools_gib, sweep.pools_blocks, sweep.seqs, sweep.preemptions, style, current=(i, j),
            title="Preemptions per run", colorbar_title="preemptions", color=theme.VERMILLION,
            pending=sweep.pending), "preemption-sweep-preemptions", style)
    with right:
        page.show_chart(charts.sweep_heatmap(
            sweep.pools_gib, sweep.pools_blocks, sweep.seqs, sweep.finish_ms / 1000, style, current=(i, j),
            title="Mean finish time (s)", colorbar_title="mean finish (s)", color=theme.BLUE, value_format=".2f",
            from_zero=False, pending=sweep.pending),
            "preemption-sweep-latency", style)
    where = "your setting" if exact else "the grid cell nearest your setting"
    st.caption(f"Outlined: {where} ({fmt_gib(pool)}, max_num_seqs {config.max_num_seqs}). "
               f"{sweep.preemptions.size} runs of this workload, cached: moving the pool or max_num_seqs knobs only "
               "moves the outline.")
    if sweep.pending is None:
        page.notice(sizing.sweep_notices(sweep, pool, config.max_num_seqs))
