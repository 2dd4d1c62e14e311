"""Text from outside on the page and in its files, without Streamlit (issue 40): the Markdown escapes (``plain``,
``as_code``) hold against blank lines and backticks, numbers in links and cells are ASCII digits only, the
Workbench's table link and CSV import refuse what would crash them, and CSV downloads neutralise formulas and read
back what they wrote."""

from __future__ import annotations

import base64
import re
import zlib

import pytest

from sim import presets
from sim.engine import simulate
from ui import sections
from ui import workbench_runs as wr
from ui import workbench_table as wt
from ui.controls import Knob
from ui.wording import as_code, plain

BREAKERS = ["\n\n# Session expired\n\n[Log in](https://evil.example/x)", "`![](//evil.example/g)`", "``` x ```",
            "a\r\n\r\n## h", "x\u2028# h", "`", "\x1b[2J", "=== ", "- item", "1. item", "&#91;x&#93;(//evil.example)"]


def _code_span_content(markdown: str) -> str | None:
    """The text of ``markdown`` when it is exactly one code span (CommonMark: a run of n backticks, then anything
    with no run of exactly n backticks, then n backticks), on one line; None otherwise."""
    m = re.fullmatch(r"(`+)(.*?)(`+)", markdown, re.S)
    if not m or len(m[1]) != len(m[3]) or "\n" in markdown or "\r" in markdown:
        return None
    inner = m[2]
    if any(len(run) == len(m[1]) for run in re.findall("`+", inner)):
        return None
    return inner[1:-1] if inner.startswith(" ") and inner.endswith(" ") and inner.strip() else inner


@pytest.mark.parametrize("text", BREAKERS, ids=repr)
def test_as_code_is_one_code_span_on_one_line_whatever_the_text(text):
    shown = as_code(text)
    inner = _code_span_content(shown)
    assert inner is not None, shown
    assert inner.replace("\\n", "\n").replace("\\r", "\r").replace("\\u2028", "\u2028").replace(
        "\\x1b", "\x1b") == text  # (the whole text, control characters as their escapes)


@pytest.mark.parametrize("text", BREAKERS, ids=repr)
def test_plain_leaves_no_unescaped_markdown_character_and_no_line_break(text):
    shown = plain(text)
    assert "\n" not in shown and "\r" not in shown and "\u2028" not in shown and "\x1b" not in shown
    unescaped = re.sub(r"\\.", "", shown)
    assert not re.search(r"[`*_\[\]<>()!#&|~$:\\]", unescaped), shown
    assert not re.match(r"\s*([-+=]|\d+[.)])", shown), shown  # (no list, rule or setext line at its start)


def test_a_knob_takes_ascii_digits_only_and_says_what_is_allowed():
    blocks = Knob("num_blocks", "KV pool size (blocks)", "int", 999, min=8, max=4000)
    for bad in ("²", "٣", "9" * 5000, "1_000", " ", "0x10", "\n\n# h"):
        with pytest.raises(ValueError, match="must be a whole number between 8 and 4000"):
            blocks.parse(bad)
    assert blocks.parse("12") == 12
    rate = Knob("rate", "Arrival rate", "float", 0.25, min=0.05, max=2.0)
    for bad in ("١.٥", "nan", "inf", "1_0", "9" * 5000):
        with pytest.raises(ValueError, match="must be a number between 0.05 and 2"):
            rate.parse(bad)
    assert rate.parse("0.5") == 0.5


@pytest.mark.parametrize("raw", ["²", "٣", "9" * 5000, "1" * 30 + ".0"], ids=lambda r: repr(r[:12]))
def test_a_cell_takes_ascii_digits_only(raw):
    with pytest.raises(ValueError, match="a whole number from 0 to 5,000, got"):
        wt.parse_whole(raw, 0, 5000)


def _deep(frames: int, fn):
    return fn() if frames == 0 else _deep(frames - 1, fn)


def test_a_table_link_that_unpacks_to_990_nested_lists_is_refused_with_a_reason():
    # 36 characters; under a Streamlit script (~100 frames deep) json.loads ran out of stack: RecursionError.
    param = "1." + base64.urlsafe_b64encode(zlib.compress(b"[" * 990 + b"]" * 990, 9)).decode().rstrip("=")
    assert len(param) == 36
    with pytest.raises(ValueError, match="cut or changed|not a list of cells"):
        _deep(100, lambda: wt.decode_rows(param))


def test_a_csv_with_one_cell_past_the_csv_field_limit_says_so():
    text = "id,arrival_step,prompt_len,output_len\nr0,0,4,4\n" + "x" * 150_000 + ",0,4,4\n"
    with pytest.raises(ValueError, match=r"line 3: a cell longer than 131,072 characters \(an id, a client"):
        wt.from_csv(text)
    with pytest.raises(ValueError, match="line 1: a cell longer than"):  # (the header line too)
        wt.from_csv("x" * 140_000 + ",arrival_step\n")


HOSTILE_CELLS = {"id": "=HYPERLINK(\"http://evil.example\",\"x\")", "client": "@SUM(A1)",
                 "prefix_group": "+cmd|' /C calc'!A0"}


def test_the_table_csv_neutralises_formulas_and_reads_back_every_cell():
    table = [{**{k: "" for k in wt.KEYS}, **HOSTILE_CELLS, "arrival_step": "0", "prompt_len": "4", "output_len": "4",
              "priority": "-5"},
             {**{k: "" for k in wt.KEYS}, "id": "-2", "client": "'quoted", "arrival_step": "=1+1", "prompt_len": "4",
              "output_len": "4", "priority": "-1,000"}]
    text = wt.to_csv(table)
    cells = [line.split(",") for line in text.splitlines()[1:]]
    assert all(not c.startswith(("=", "+", "@", "\t", "\r")) for line in cells for c in line if c), text
    assert "-5" in text.splitlines()[1].split(",")  # (a negative priority stays a number)
    assert wt.from_csv(text) == table


def test_every_requests_csv_neutralises_ids_and_clients_and_keeps_numbers():
    base = presets.get("article_hol").scenario
    requests = tuple(r.__class__(f"=cmd|' /C calc'!A{i}", r.arrival_step, r.prompt_len, r.output_len,
                                 client_id="@evil", priority=-1 - i) for i, r in enumerate(base.requests))
    scenario = base.__class__(base.name, base.config, requests)
    trace = simulate(scenario.config, scenario.requests)
    lines = sections.requests_csv(scenario, trace).splitlines()
    header = lines[0].split(",")
    first = next(iter(__import__("csv").reader([lines[1]])))
    assert first[header.index("id")].startswith("'=cmd") and first[header.index("client")] == "'@evil"
    assert first[header.index("priority")] == "-1"  # (a number column: no quote)


def test_a_runs_label_shows_weights_without_markup():
    choice = wr.RunChoice("vtc", weights="![](//host/w.png):2, <a href=x>B</a>:3, A_1:2")
    label = choice.label()
    assert not re.search(r"[<>\[\]()!&%`$#/]", label), label
    assert label.startswith("VTC") and "A_1:2" in label
    assert choice.config(wr.engine_config(999, 16, 1, 2048, True, 0.0, "llama-3.1-8b")).client_weight(
        "![](//host/w.png)") == 2.0  # (the config keeps the client's name as typed)
    with pytest.raises(ValueError, match="VTC weights"):
        wr.parse_weights("A:²")
