"""A check several test modules share: a chart builder or lesson helper left a trace exactly as it found it."""

from __future__ import annotations

import numpy as np

from sim.trace import Trace


def assert_trace_unchanged(before: Trace, after: Trace) -> None:
    """Every array and list of ``after`` equals ``before``'s (a deep copy taken before any builder ran)."""
    for group in ("steps", "clients", "requests"):
        old_group, new_group = getattr(before, group), getattr(after, group)
        assert set(new_group) == set(old_group), group
        for key, value in old_group.items():
            np.testing.assert_array_equal(new_group[key], value, err_msg=f"{group}.{key}")
    for name in ("preempted_at_steps", "resumed_at_steps", "swapped_out_at_steps", "swapped_in_at_steps",
                 "finish_reason", "request_ids", "client_ids", "events"):
        assert getattr(after, name) == getattr(before, name), name
    for name in ("sched_rows", "sched_tokens", "sched_kind", "sched_offsets"):
        np.testing.assert_array_equal(getattr(after, name), getattr(before, name), err_msg=name)
