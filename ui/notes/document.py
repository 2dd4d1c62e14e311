"""A lesson's notes page, as Markdown (``LESSON.md``) and as one self-contained HTML file (``LESSON.html``, its
figures inline as SVG), both written from one list of blocks so they say the same. Per preset: its description,
the scenario it ran (each run's JSON and the ``python -m sim run`` line that reproduces it), the headline numbers,
the "what to notice" sentences, each figure under the page's section headings with its caption and its files, and
the metrics table. Nothing in them depends on the time or the machine: the same export writes the same bytes.
"""

from __future__ import annotations

import html
import numbers
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from . import captions
from .capture import Capture, Card, Chart

FORMAT_LABELS = {"svg": "SVG", "png": "PNG, 3x", "html": "interactive HTML"}


@dataclass(frozen=True)
class Figure:
    chart: Chart
    files: dict[str, str]  # format -> path relative to the notes page
    svg: bytes = b""  # the figure, inlined in the HTML page


@dataclass(frozen=True)
class PresetNotes:
    capture: Capture
    figures: list[Figure]
    scenarios: list[tuple[str, str]]  # (run label, scenario JSON path relative to the notes page)


@dataclass(frozen=True)
class Block:
    """One piece of the page: ``kind`` is heading, text, list, figure, table or code."""

    kind: str
    text: str = ""
    level: int = 0
    items: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()  # a table's rows, the header first
    figure: Figure | None = None
    anchor: str = ""
    extra: dict = field(default_factory=dict)


def blocks(lesson_title: str, question: str, summary: str, command: str, presets: Sequence[PresetNotes],
           theme: str = "print") -> list[Block]:
    out = [Block("heading", f"{lesson_title}: course notes", level=1, anchor="top"),
           Block("text", f"*{question}* {summary}"),
           Block("text", f"Exported by `{command}` from Scheduler Lab. Every figure, sentence and number below is the "
                         f"one the {lesson_title} page draws on that preset (run headless, in the {theme} theme); "
                         "the same command on the same commit writes the same files. The `python -m sim run` lines "
                         "run in a Scheduler Lab checkout, from this folder."),
           Block("list", items=tuple(f"{captions.md_escape(p.capture.preset.title)} (`{p.capture.preset.key}`)"
                                     for p in presets), extra={"links": [_anchor(p) for p in presets]})]
    number = 0
    for notes in presets:
        cap = notes.capture
        out.append(Block("heading", captions.md_escape(cap.preset.title), level=2, anchor=_anchor(notes)))
        out.append(Block("text", f"Preset `{cap.preset.key}`. {captions.page_markdown(cap.preset.description)}"))
        out.extend(_scenario(notes))
        if cap.cards:
            out.append(Block("heading", "Headline numbers", level=3))
            out.append(Block("list", items=tuple(_card(c) for c in cap.cards)))
        if cap.notices:
            out.append(Block("heading", "What to notice", level=3))
            out.append(Block("list", items=tuple(captions.page_markdown(s) for s in cap.notices)))
        for warning in cap.warnings:
            out.append(Block("text", f"The page warns: {captions.page_markdown(warning)}"))
        section = None
        for figure in notes.figures:
            if figure.chart.section != section:
                section = figure.chart.section
                out.append(Block("heading", captions.md_escape(section or "Figures"), level=3))
            number += 1
            out.append(Block("figure", captions.caption(number, figure.chart, cap), figure=figure))
        if cap.tables:
            out.append(Block("heading", "Metrics", level=3))
            out.extend(Block("table", rows=_table(table)) for table in cap.tables)
    return out


def _anchor(notes: PresetNotes) -> str:
    return f"preset-{notes.capture.preset.key}"


def _scenario(notes: PresetNotes) -> list[Block]:
    cap = notes.capture
    differences = captions.run_differences(cap.runs)
    labels = [label for label, _ in cap.runs]
    text = (f"**The scenario.** {captions.requests_phrase(cap.runs[0][1])}, run "
            f"{'once' if len(labels) == 1 else f'{len(labels)} ways'}: "
            f"{captions.runs_phrase(labels, differences)}. Shared settings: "
            f"{', '.join(captions.common_settings(cap.runs))}. On the page: {cap.lesson.title}, "
            f"`?{'&'.join(f'{k}={v}' for k, v in cap.query.items())}`.")
    rows = [("run", "scenario", "reproduce")]
    for label, path in notes.scenarios:
        stem = path.rsplit("/", 1)[-1].removesuffix(".json")
        rows.append((captions.md_escape(label), f"[{stem}.json]({path})",
                     f"`python -m sim run {path} --out {stem}-result.json`"))
    return [Block("text", text), Block("table", rows=tuple(rows))]


def _card(card: Card) -> str:
    text = f"{captions.page_markdown(card.label)}: **{captions.page_markdown(card.value)}**"
    return text + (f" ({captions.page_markdown(card.caption)})" if card.caption else "")


def _table(frame: pd.DataFrame) -> tuple[tuple[str, ...], ...]:
    """A table as the page shows it: its index as the first column when it has a name (the metrics tables), the
    page's text as it is, numbers with thousands separators and no float noise."""
    named = frame.index.name is not None
    head = ((str(frame.index.name),) if named else ()) + tuple(str(c) for c in frame.columns)
    rows = [tuple(captions.md_escape(c) for c in head)]
    for index, row in frame.iterrows():
        rows.append(((captions.md_escape(str(index)),) if named else ()) + tuple(_cell(v) for v in row))
    return tuple(rows)


def _cell(value: object) -> str:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return "—" if value != value else f"{value:,.3f}".rstrip("0").rstrip(".")  # (NaN: no value)
    return captions.md_escape(str(value))


# ---- Markdown ----------------------------------------------------------------------------------------------------
def markdown(items: Sequence[Block]) -> str:
    parts = []
    for b in items:
        if b.kind == "heading":
            parts.append(f"{'#' * b.level} {b.text}")
        elif b.kind == "text":
            parts.append(b.text)
        elif b.kind == "list":
            parts.append("\n".join(f"- {item}" for item in b.items))
        elif b.kind == "table":
            lines = [_md_row(b.rows[0]), "|" + "---|" * len(b.rows[0])] + [_md_row(r) for r in b.rows[1:]]
            parts.append("\n".join(lines))
        elif b.kind == "figure":
            parts.append(_md_figure(b))
    return "\n\n".join(parts) + "\n"


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _md_figure(b: Block) -> str:
    assert b.figure is not None
    files = b.figure.files
    image = files.get("svg") or files.get("png")
    alt = captions.md_escape(captions.title(b.figure.chart))
    shown = f"![{alt}]({image})\n\n" if image else ""
    links = " · ".join(f"[{FORMAT_LABELS[fmt]}]({path})" for fmt, path in files.items())
    return f"{shown}{b.text}" + (f" Files: {links}." if links else "")


# ---- HTML --------------------------------------------------------------------------------------------------------
_CSS = """
body { font-family: Arial, Helvetica, 'DejaVu Sans', sans-serif; max-width: 52rem; margin: 2rem auto; padding: 0 1rem;
       line-height: 1.45; color: #000; background: #fff; }
figure { margin: 1.5rem 0; break-inside: avoid; }
figure svg { display: block; max-width: 100%; height: auto; }
figcaption { font-size: 0.92rem; }
table { border-collapse: collapse; font-size: 0.9rem; margin: 0.5rem 0 1rem; }
th, td { border: 1px solid #999; padding: 0.2rem 0.5rem; text-align: left; vertical-align: top; }
td.num { text-align: right; }
code { font-size: 0.88em; background: #f2f2f2; padding: 0 0.2em; }
h2 { border-top: 2px solid #000; padding-top: 0.8rem; margin-top: 2.5rem; }
@media print { body { max-width: none; margin: 0; } h2 { break-before: page; } a { color: #000; } }
"""


def page_html(items: Sequence[Block], title: str) -> str:
    body = []
    for b in items:
        if b.kind == "heading":
            anchor = f' id="{b.anchor}"' if b.anchor else ""
            body.append(f"<h{b.level}{anchor}>{inline(b.text)}</h{b.level}>")
        elif b.kind == "text":
            body.append(f"<p>{inline(b.text)}</p>")
        elif b.kind == "list":
            links = b.extra.get("links")
            items_html = [f'<a href="#{links[i]}">{inline(t)}</a>' if links else inline(t)
                          for i, t in enumerate(b.items)]
            body.append("<ul>\n" + "\n".join(f"<li>{t}</li>" for t in items_html) + "\n</ul>")
        elif b.kind == "table":
            head = "".join(f"<th>{inline(c)}</th>" for c in b.rows[0])
            rows = "\n".join("<tr>" + "".join(_td(c) for c in r) + "</tr>" for r in b.rows[1:])
            body.append(f"<table>\n<thead><tr>{head}</tr></thead>\n<tbody>\n{rows}\n</tbody>\n</table>")
        elif b.kind == "figure":
            body.append(_html_figure(b))
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
            + "\n".join(body) + "\n</body>\n</html>\n")


_NUMBER = re.compile(r"^[-+−]?[\d,]*\.?\d+\s*%?$|^—$")


def _td(cell: str) -> str:
    """A table cell; a number is aligned right."""
    return f'<td class="num">{inline(cell)}</td>' if _NUMBER.match(cell.strip()) else f"<td>{inline(cell)}</td>"


def _html_figure(b: Block) -> str:
    assert b.figure is not None
    svg = b.figure.svg.decode("utf-8")
    svg = re.sub(r"^<\?xml[^>]*>\s*", "", svg)
    links = " · ".join(f'<a href="{html.escape(path)}">{FORMAT_LABELS[fmt]}</a>'
                       for fmt, path in b.figure.files.items())
    files = f" Files: {links}." if links else ""
    return f"<figure>\n{svg}\n<figcaption>{inline(b.text)}{files}</figcaption>\n</figure>"


_INLINE = re.compile(r"`([^`]+)`|\*\*(.+?)\*\*|(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])|\[([^\]]+)\]\(([^)\s]+)\)"
                     r"|\\(.)")


def inline(text: str) -> str:
    """The notes' inline Markdown (code spans, bold, emphasis, links, backslash escapes) as HTML."""
    out, at = [], 0
    for m in _INLINE.finditer(text):
        out.append(html.escape(text[at:m.start()], quote=False))
        code, bold, em, link_text, href, escaped = m.groups()
        if code is not None:
            out.append(f"<code>{html.escape(code, quote=False)}</code>")
        elif bold is not None:
            out.append(f"<strong>{inline(bold)}</strong>")
        elif em is not None:
            out.append(f"<em>{inline(em)}</em>")
        elif link_text is not None:
            out.append(f'<a href="{html.escape(href)}">{inline(link_text)}</a>')
        else:
            out.append(html.escape(escaped, quote=False))
        at = m.end()
    out.append(html.escape(text[at:], quote=False))
    return "".join(out)
