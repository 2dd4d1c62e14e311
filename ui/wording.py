"""Small helpers for sentences and hover text: numbers with their nouns, lists joined with "and", sizes and
changes."""

from __future__ import annotations

import decimal
import math
import re
from collections.abc import Sequence
from typing import NamedTuple

from sim.events import join_and  # noqa: F401 (here too: the UI's sentences use it as wording.join_and)
from sim.untrusted import printable


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and the noun in the right number, with thousands separators: "1 request", "2,345 requests",
    "1 batch slot"; ``plural`` for a noun that does not just take an "s"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve")


def number_word(n: int) -> str:
    """A small whole number as a word ("three"), a larger one as digits with separators ("16", "1,200")."""
    return _WORDS[n] if 0 <= n < len(_WORDS) else f"{n:,}"


def a_number(n: int) -> str:
    """"a 2,000" or "an 8,000": the article a whole number takes when read aloud (eight, eleven, eighteen, eighty
    start with a vowel sound), then the number with thousands separators."""
    digits = str(abs(n))
    vowel = digits.startswith("8") or (len(digits) % 3 == 2 and digits[:2] in ("11", "18"))
    return f"{'an' if vowel else 'a'} {n:,}"


def sentence_case(text: str) -> str:
    """``text`` with its first letter a capital ("time between tokens" -> "Time between tokens")."""
    return text[:1].upper() + text[1:]


def fmt_fixed(value: float, decimals: int = 2) -> str:
    """``value`` with ``decimals`` decimals and thousands separators, a half rounded up as people do ("3.13" for
    3.125, where Python's format rounds the binary value to even: "3.12")."""
    if not math.isfinite(value):
        return f"{value}"
    rounded = decimal.Decimal(repr(value)).quantize(decimal.Decimal(1).scaleb(-decimals), decimal.ROUND_HALF_UP)
    return f"{rounded:,.{decimals}f}"


def fmt_gib(gib: float) -> str:
    """A memory size given in GiB, for people: "1.95 GiB", three digits under 1 GiB ("0.125 GiB"), or in the unit
    that fits below 0.1 GiB ("64 MiB", "0.125 MiB", "128 KiB", "96 B")."""
    if gib >= 1:
        return f"{fmt_fixed(gib)} GiB"
    return f"{gib:.3g} GiB" if gib >= 0.1 else fmt_binary_size(gib * 2**30)


def fmt_binary_size(num_bytes: float) -> str:
    """A memory size for people, in the binary unit that fits: "96 B", "128 KiB", "2 MiB", "1.5 GiB" (three
    significant digits; any model size, a one-layer toy's 2 bytes a token included)."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if num_bytes >= size:
            return f"{num_bytes / size:,.3g} {unit}"
    return f"{num_bytes:,.0f} B" if num_bytes >= 1 else f"{num_bytes:.3g} B"


def pct_change(before: float, after: float) -> str:
    """The relative change from ``before`` to ``after``, signed: "+12%", "-55%", and one decimal under 1% so a
    small change never reads as "-0%" ("-0.4%")."""
    change = (after - before) / before * 100
    return f"{change:+.1f}%" if abs(change) < 1 else f"{change:+.0f}%"


# What each kind of trace event did, before the engine's own words. The engine's words for the other kinds (admit,
# finish, abort, reject, disconnect) already start with what happened: "admitted with a first chunk of 512 tokens".
_EVENT_LABELS = {"arrive": "arrived", "resume": "resumed", "preempt": "preempted", "swap_out": "swapped out",
                 "swap_in": "swapped back in", "blocked": "is next in line but not admitted", "promote": "promoted"}



class Card(NamedTuple):
    """One headline number as a page shows it: "FCFS: average finish" -> "1,100 steps", a caption under it, a
    tooltip (ui.page.cards draws a row of them)."""
    label: str
    value: str
    caption: str = ""
    help: str = ""


def event_label(kind: str, *, swapped: bool = False) -> str:
    """What an event of ``kind`` says after the request's id ("preempted", "is next in line but not admitted");
    '' where the reason says it all (admitted, finished). ``swapped``: a "blocked" event of a request waiting in
    CPU memory (it is not in the waiting queue, so it is not "next in line")."""
    return "is not swapped back in yet" if kind == "blocked" and swapped else _EVENT_LABELS.get(kind, "")


def safe_id(request_id: str) -> str:
    """One id from a file for a Markdown sentence (``plain``, cut to 40 characters)."""
    return plain(request_id, 40)


def safe_ids(ids: Sequence[str]) -> list[str]:
    """Request (or client) ids from a file, made safe for a Markdown sentence (``plain``, cut to 40 characters):
    "r12" stays "r12", "[x](https://...)" is shown as typed."""
    return [plain(i, 40) for i in ids]


def chart_text(text: str, limit: int = 40) -> str:
    """A request or client id from a file, for a chart's labels, legend, ticks or hovers: plotly renders a subset
    of HTML there (links, <img>-like tags, <b>) and reads ``%{...}`` in a hover template as a field, so '&', '<',
    '>' and '%' become entities (plotly shows them as typed); cut to ``limit`` characters."""
    return (cut(text, limit).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("%", "&#37;"))


def chart_ids(ids: Sequence[str]) -> list[str]:
    """``chart_text`` of each id (ids that need nothing, the usual "r12" or "A", come back as they are)."""
    return [chart_text(i) if len(i) > 40 or not _PLAIN_ID.fullmatch(i) else i for i in ids]


_PLAIN_ID = re.compile(r"[\w .:/-]*")


def file_slug(*parts: str) -> str:
    """A file name from ``parts`` that every system accepts: letters, digits, '.', '_' and '-' only, joined by
    '-' ("VTC 1:2 (weights A 1 : B 3)" -> "VTC_1-2_weights_A_1-B_3")."""
    def clean(text: str) -> str:
        text = re.sub(r"\s*:\s*", "-", text.strip())
        text = re.sub(r"[^A-Za-z0-9._-]+", "_", text)
        return re.sub(r"_*-_*", "-", text).strip("_-.")
    return "-".join(c for c in map(clean, parts) if c) or "scheduler-lab"


def as_code(text: str, limit: int = 80) -> str:
    """Text from outside (a link's value, a file's name) for a Markdown message, shown as code: cut to ``limit``
    characters, each control character as its escape (``sim.untrusted.printable``: a blank line in a link is
    ``\\n\\n``, not the end of the code span and the start of a heading), and fenced by one backtick more than the
    longest run of backticks inside, so that nothing in it can close the span."""
    shown = printable(cut(text, limit))
    fence = "`" * (max(map(len, re.findall("`+", shown)), default=0) + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") else ""  # (CommonMark strips one space each side)
    return f"{fence}{pad}{shown}{pad}{fence}"


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, with an ellipsis where it was cut."""
    return text[:limit] + ("…" if len(text) > limit else "")


# Every ASCII character Markdown, GFM, LaTeX or Streamlit's :directives: act on (CommonMark lets a backslash escape
# any ASCII punctuation); "." and "-" only where they would start a list or a rule (the text's start), "#" always (a
# heading where a caption starts with it), "&" always (an entity such as &#91; would show as another character).
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()!|~$:#&])")
_LINE_START = re.compile(r"^([-+=]|\d+(?=[.)]))")  # a list item, a rule or a setext line where the text starts
_AUTOLINK = re.compile(r"(\\:|www|@)", re.IGNORECASE)  # where GFM starts a link by itself (once escaped)


def plain(text: str, limit: int = 300) -> str:
    """Text from outside (a link's value, a file's name, a cell, an id, a run's label) for a Markdown message, shown
    as the words it is: line breaks and runs of spaces become one space, other control characters their escapes
    (``sim.untrusted.printable``), every character Markdown, HTML, LaTeX or Streamlit's :directives: would act on is
    escaped (no heading, list, link, image, tag or formula), an invisible zero-width space breaks what the renderer
    would turn into a link by itself (a bare URL, www., an e-mail address), and it is cut to ``limit`` characters.
    The one escape of such text for Markdown (``as_code`` shows it as code instead); tests/test_markup_rule.py finds
    interpolation into Markdown that goes around them."""
    escaped = _MARKDOWN_SPECIAL.sub(r"\\\1", printable(" ".join(cut(text, limit).split())))
    escaped = _LINE_START.sub(lambda m: f"{m[1]}\\" if m[1][0] in "0123456789" else f"\\{m[1]}", escaped)
    return _AUTOLINK.sub("\\1\u200b", escaped)
