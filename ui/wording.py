"""Small helpers for sentences and hover text: numbers with their nouns."""

from __future__ import annotations


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun in the right number, with thousands separators: "1 request", "2,345 requests",
    "1 batch slot"; ``plural`` for a noun that does not just take an "s"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"
