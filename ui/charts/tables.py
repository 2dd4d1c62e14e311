"""The metrics table: ``sim.metrics.summary`` dicts (one per policy label) as one tidy frame, units in headers.

One row per policy label, one column per metric. Latencies are over served requests (see sim.metrics). Numbers
are rounded for reading: latencies to 0.1 (steps or ms), rates to whole tokens/s, counts are integers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

# key -> (header, path into the summary ("{u}" = steps or ms), decimals; None = integer count)
METRIC_COLUMNS: dict[str, tuple[str, str, int | None]] = {
    "served": ("served (requests)", "num_served", None),
    "finish_mean": ("mean finish time ({u})", "finish_{u}.mean", 1),
    "finish_p50": ("p50 finish time ({u})", "finish_{u}.p50", 1),
    "finish_p99": ("p99 finish time ({u})", "finish_{u}.p99", 1),
    "finish_max": ("max finish time ({u})", "finish_{u}.max", 1),
    "queue_mean": ("mean queueing delay ({u})", "queue_{u}.mean", 1),
    "queue_p99": ("p99 queueing delay ({u})", "queue_{u}.p99", 1),
    "ttft_mean": ("mean time to first token, TTFT ({u})", "ttft_{u}.mean", 1),
    "ttft_p99": ("p99 TTFT ({u})", "ttft_{u}.p99", 1),
    "tbt_p50_ms": ("p50 time between tokens, TBT (ms)", "tbt_ms.p50", 1),
    "tbt_p99_ms": ("p99 TBT (ms)", "tbt_ms.p99", 1),
    "tbt_max_ms": ("max TBT (ms)", "tbt_ms.max", 1),
    "throughput": ("throughput (tokens/s)", "throughput_tok_s", 0),
    "read": ("useful throughput (tokens read/s)", "read_tok_s", 0),
    "throughput_req": ("throughput (requests/s)", "throughput_req_s", 2),
    "slo_share": ("met every SLO (share of requests)", "slo_share", 3),
    "slo_goodput": ("goodput, requests meeting every SLO (requests/s)", "slo_goodput_req_s", 2),
    "slo_goodput_tokens": ("goodput, their tokens read (tokens/s)", "slo_goodput_tok_s", 0),
    "preemptions": ("preemptions (count)", "num_preemptions", None),
    "swaps": ("swaps (count)", "num_swaps", None),
    "recomputed": ("recomputed (tokens)", "recomputed_tokens", None),
    "wasted": ("wasted (tokens)", "wasted_tokens", None),
    "wasted_gpu": ("wasted GPU time (ms)", "wasted_gpu_ms", 1),
    "aborted": ("aborted (requests)", "num_aborted", None),
    "rejected": ("rejected (requests)", "num_rejected", None),
    "shed": ("shed past their TTFT target (requests)", "num_shed", None),
    "peak_kv": ("peak KV (blocks)", "peak_used_blocks", None),
}


def metrics_table(
    summaries: Mapping[str, Mapping[str, Any]], unit: str = "steps", columns: Sequence[str] | None = None
) -> pd.DataFrame:
    """A frame with a ``policy`` column and the chosen METRIC_COLUMNS (all by default), one row per label."""
    if unit not in ("steps", "ms"):
        raise ValueError(f"unit: must be 'steps' or 'ms', got {unit!r}")
    keys = list(METRIC_COLUMNS) if columns is None else list(columns)
    unknown = [k for k in keys if k not in METRIC_COLUMNS]
    if unknown:
        raise ValueError(f"columns: unknown {unknown}; choose from {', '.join(METRIC_COLUMNS)}")
    data: dict[str, Any] = {"policy": list(summaries)}
    for key in keys:
        header, values = metric_row(summaries, key, unit)
        decimals = METRIC_COLUMNS[key][2]
        # counts and whole rates: integers, a missing value shown as <NA> rather than a float
        data[header] = pd.Series(values, dtype=np.float64 if decimals else "Int64")
    return pd.DataFrame(data)


def metric_row(summaries: Mapping[str, Mapping[str, Any]], key: str, unit: str = "steps") -> tuple[str, list[Any]]:
    """One metric across the policies, rounded to its METRIC_COLUMNS decimals: (its header, one value per label;
    a count or whole rate is an int, None where it is missing). A row of the pages' table, a column of
    ``metrics_table``."""
    header, path, decimals = METRIC_COLUMNS[key]
    v = np.round(np.array([_lookup(s, path.format(u=unit)) for s in summaries.values()]), decimals or 0)
    if decimals:
        return header.format(u=unit), v.tolist()
    return header.format(u=unit), [int(x) if np.isfinite(x) else None for x in v.tolist()]


def _lookup(summary: Mapping[str, Any], path: str) -> float:
    value: Any = summary
    for part in path.split("."):
        value = value[part]
    return float(value)
