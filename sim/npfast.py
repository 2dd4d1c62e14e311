"""numpy calls for the step loop, minus fixed costs they do not need.

A busy step makes a few dozen numpy calls on arrays of a few hundred elements, thousands of steps a run, so what
a call costs before it touches the data matters more than the work itself:
- the ufunc methods skip the Python wrappers of ``np.sum`` and ``np.cumsum``;
- numpy converts a Python int operand (``a + 1``) on every call, ~0.3 us, a third of the whole operation on a small
  array; a 0-d array operand is used as it is. ``ONE`` is int64: use it with int64 arrays only (the result's dtype
  is the wider operand's), ``ONE_I8`` with int8.
"""

import numpy as np

add_reduce = np.add.reduce  # np.sum without its wrapper
add_accumulate = np.add.accumulate  # np.cumsum without its wrapper
max_reduce = np.maximum.reduce  # np.max without its wrapper


def constant(value: int, dtype=np.int64) -> np.ndarray:
    """A read-only 0-d array operand."""
    a = np.array(value, dtype=dtype)
    a.flags.writeable = False
    return a


ZERO = constant(0)
ONE = constant(1)
ONE_I8 = constant(1, np.int8)


def distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` of a small array (a step's clients), without ``np.unique``'s fixed costs (a third)."""
    s = np.sort(values)
    if len(s) < 2:
        return s
    keep = np.empty(len(s), dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


def distinct_counts(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_counts=True)`` of a small array, the same way."""
    s = np.sort(values)
    if not len(s):
        return s, np.zeros(0, dtype=np.int64)
    starts = np.empty(len(s), dtype=bool)
    starts[0] = True
    np.not_equal(s[1:], s[:-1], out=starts[1:])
    first = np.flatnonzero(starts)
    return s[first], np.diff(first, append=len(s))
