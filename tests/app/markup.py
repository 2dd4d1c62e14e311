"""What a page's Markdown would draw from hostile text (issue 40): the link fuzzer's and the hostile links' check.

``live_markup(source)`` reads a Markdown source as CommonMark (and GFM, and Streamlit's extras) would, far enough to
find a heading, a link, an image, an autolink, an HTML tag, a formula or a :color[...] directive; it reports those
that carry one of the corpus's ``MARKERS`` (every hostile entry holds one), so the page's own headings and its
glossary links are not reported. Code spans (a run of n backticks to the next run of exactly n, within one
paragraph) and backslash-escaped characters are text, as in CommonMark.

``page_markdown(at)`` is every Markdown source an AppTest page shows: messages, captions, titles, expander, metric,
button and widget labels and their help texts.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from streamlit.testing.v1 import AppTest

# Every hostile entry of the corpus holds one of these (a host, a word of a forged message).
MARKERS = ("evil", "host", "PWNED", "Session expired", "Log in")

_ATX = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")
_SETEXT = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
_LINES = re.compile(r"\r\n|\r|\n")
_ESCAPED = re.compile(r"\\[!-/:-@\[-`{-~]")
_CONSTRUCTS = {
    "link or image": re.compile(r"!?\[[^\]]*\]\s*\([^)]*\)|!?\[[^\]]*\]\s*\[[^\]]*\]"),
    "autolink": re.compile(r"<(?:[a-z][a-z0-9+.-]{1,31}:|//)[^<>\s]*>|(?:https?://|www\.)\S+|[\w.+-]+@[\w-]+\.\w+",
                           re.IGNORECASE),
    "HTML tag": re.compile(r"<\s*/?\s*(?:img|a|script|iframe|svg|b|h\d|style|link|object|embed|video|audio|source|"
                           r"input|form|div|span|p|math)\b[^>]*>?", re.IGNORECASE),
    "formula": re.compile(r"\$[^$]+\$"),
    "directive": re.compile(r":[a-z-]+\[[^\]]*\]|:material/[a-z_]+:"),
}


def _marked(text: str) -> bool:
    return any(m.lower() in text.lower() for m in MARKERS)


def _without_code_spans(paragraph: str) -> str:
    """``paragraph`` with its code spans (and backslash escapes outside them) replaced by a neutral character."""
    out, i = [], 0
    while i < len(paragraph):
        c = paragraph[i]
        if c == "\\" and i + 1 < len(paragraph) and _ESCAPED.match(paragraph, i):
            out.append("·")
            i += 2
            continue
        if c == "`":
            n = len(re.match(r"`+", paragraph[i:])[0])
            close = next((m for m in re.finditer(r"`+", paragraph[i + n:]) if len(m[0]) == n), None)
            if close is None:  # (a run with no partner is literal backticks)
                out.append("·" * n)
                i += n
                continue
            i += n + close.end()
            out.append("·")
            continue
        out.append(c)
        i += 1
    return "".join(out)


def live_markup(source: str) -> list[str]:
    """The headings, links, images, autolinks, tags, formulas and directives ``source`` would draw that carry a
    marker of the corpus, each as "what: text"."""
    found = []
    lines = _LINES.split(source)
    for before, line in zip(["", *lines], lines, strict=False):
        if _ATX.match(line) and _marked(line):
            found.append(f"heading: {line[:80]}")
        if _SETEXT.match(line) and before.strip() and _marked(before):
            found.append(f"heading: {before[:80]}")
    paragraphs = re.split(r"\n[ \t]*\n", "\n".join(lines))
    for paragraph in paragraphs:
        text = _without_code_spans(paragraph)
        for what, pattern in _CONSTRUCTS.items():
            found += [f"{what}: {m[0][:80]}" for m in pattern.finditer(text) if _marked(m[0])]
    return found


_MESSAGES = ("markdown", "caption", "info", "warning", "error", "success", "toast", "title", "header", "subheader",
             "exception")
_LABELLED = ("expander", "metric", "button", "checkbox", "toggle", "radio", "selectbox", "multiselect", "slider",
             "select_slider", "number_input", "text_input", "text_area", "button_group", "tabs", "status")


def page_markdown(at: AppTest) -> Iterator[tuple[str, str]]:
    """(where, Markdown source) of everything ``at`` draws as Markdown."""
    for kind in _MESSAGES:
        for e in at.get(kind):
            value = getattr(e, "value", None)
            if isinstance(value, str):
                yield kind, value
    for kind in _LABELLED:
        for e in at.get(kind):
            for attr in ("label", "help"):
                value = getattr(e, attr, None)
                if isinstance(value, str):
                    yield f"{kind} {attr}", value
            if kind == "button_group":  # (segmented controls and pills: their option labels are Markdown)
                for option in getattr(e.proto, "options", []):
                    yield "option", getattr(option, "content", "")


def live_markup_on(at: AppTest) -> list[str]:
    """Every marked construct the page would draw, with where it is."""
    return [f"{where}: {hit}" for where, source in page_markdown(at) for hit in live_markup(source)]
