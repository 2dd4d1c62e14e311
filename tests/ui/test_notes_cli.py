"""`python -m ui.notes` without a browser: its names (lessons, presets, formats, themes) refused in one line that
names the allowed values, exit 2; no Chromium said in one line with how to install it, exit 2, no traceback; and the
pieces that make its files reproducible (a fixed figure id in each SVG) and its notes readable (Markdown -> HTML,
captions). tests/browser/test_notes_export.py exports a lesson with Chromium."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

import lessons
from tests.conftest import REPO_ROOT
from ui.notes import captions, document, export, render
from ui.notes.__main__ import main
from ui.notes.capture import Chart, _family


def _refused(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    with pytest.raises(SystemExit) as stop:
        main(list(argv))
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


@pytest.mark.parametrize(("argv", "allowed"), [
    (("nosuch",), "all, queueing, fairness, cancellation, preemption, budget"),
    (("queueing", "--preset", "article_fairness"), "default (each lesson's first), article_hol, busy_server"),
    (("all", "--preset", "nosuch"), "article_hol"),
    (("queueing", "--format", "svg,gif"), "svg, png, html"),
    (("queueing", "--format", ","), "svg, png, html"),
    (("queueing", "--theme", "dark"), "print, screen"),
    (("queueing", "--bogus"), "unrecognized arguments"),
])
def test_a_name_that_does_not_exist_is_refused_in_one_line_naming_what_is_allowed(capsys, argv, allowed):
    assert allowed in _refused(capsys, *argv)


def test_without_chromium_it_says_what_is_missing_and_how_to_install_it(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("BROWSER_PATH", raising=False)
    monkeypatch.setattr(render, "CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.setenv("PATH", str(tmp_path))
    err = _refused(capsys, "queueing", "--out", str(tmp_path / "notes"))
    assert "Chromium" in err and "apt-get install -y --no-install-recommends chromium" in err
    assert not (tmp_path / "notes").exists()  # (said before any page ran)


def test_a_browser_path_that_is_no_browser_exits_2_with_no_traceback(tmp_path):
    env = {**os.environ, "BROWSER_PATH": str(tmp_path / "chromium"), "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run([sys.executable, "-m", "ui.notes", "budget", "--out", str(tmp_path / "notes")], env=env,
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"python -m ui.notes: error: BROWSER_PATH is {tmp_path / 'chromium'}, which is not an executable file: "
        f"{render.INSTALL_HINT}."]


def test_the_plan_takes_every_preset_or_each_lessons_first():
    every = export.plan("fairness")
    assert [p.key for p in every[0].presets] == [p.key for p in lessons.lesson_of("fairness").presets()]
    first = export.plan("all", ["default"])
    assert [(j.lesson.id, [p.key for p in j.presets]) for j in first] == [
        (lesson.id, [lesson.presets()[0].key]) for lesson in lessons.LESSONS]
    assert export.command_for(first[0], export.FORMATS, "print") == \
        "python -m ui.notes queueing --preset default --out <this folder>"
    some = export.plan("all", ["stops", "sizing"])
    assert [(j.lesson.id, [p.key for p in j.presets]) for j in some] == [("cancellation", ["stops"]),
                                                                         ("preemption", ["sizing"])]
    assert export.parse_formats("PNG, svg") == ("svg", "png")


SVG = ('<svg xmlns="http://www.w3.org/2000/svg"><defs id="defs-{uid}"><g class="clips"><clipPath id="clip{uid}xy">'
       '<rect/></clipPath></g><g class="patterns"><pattern id="p{uid}-legend-1"/></g></defs>'
       '<g clip-path="url(#clip{uid}xy)"><path d="M0,123456" style="fill: url(\'#p{uid}-legend-1\')"/></g>'
       '<defs id="topdefs-{uid}"><clipPath id="legend{uid}"/></defs></svg>')


def test_an_svgs_random_figure_id_becomes_one_made_from_the_charts_name():
    one = render.stable_svg(SVG.format(uid="123456").encode(), "article_hol-kv-FCFS")
    other = render.stable_svg(SVG.format(uid="9f8e7d").encode(), "article_hol-kv-FCFS")
    assert one == other
    assert one.count(b"123456") == 1 and b'd="M0,123456"' in one  # (a path's numbers are left alone)
    ET.fromstring(one)
    assert render.stable_svg(SVG.format(uid="123456").encode(), "article_hol-gantt-FCFS") != one  # (charts inlined
    # in one page keep their clip paths apart)
    traces = render.prepared({"data": [{"type": "bar"}, {"type": "bar", "uid": "mine"}], "layout": {}})["data"]
    assert [t["uid"] for t in traces] == ["t0", "mine"]


def test_the_notes_markdown_becomes_html():
    assert document.inline("**1,100 steps** for `policy=fcfs`, *see* [x.json](a/x.json) a\\_b <i>") == (
        '<strong>1,100 steps</strong> for <code>policy=fcfs</code>, <em>see</em> <a href="a/x.json">x.json</a> '
        "a_b &lt;i&gt;")
    assert captions.page_markdown(":material/tune: a [batch](Glossary#max-num-seqs), :red[late] "
                                  "[paper](https://arxiv.org/abs/2401.00588)") == \
        "a batch, late [paper](https://arxiv.org/abs/2401.00588)"


def test_a_caption_names_the_runs_axes_legend_and_marks_a_figure_shows():
    chart = Chart("article_abandon-kv-for-nobody", {
        "data": [{"name": "wanted"}, {"name": "held by abandoned requests"}, {"name": "x", "showlegend": False}],
        "layout": {"title": {"text": "KV memory: wanted vs held for nobody"},
                   "xaxis": {"title": {"text": None}}, "xaxis2": {"title": {"text": "time (engine steps)"}},
                   "yaxis": {"title": {"text": "KV (MB)"}}, "yaxis2": {"title": {"text": "KV (% of pool)"}},
                   "yaxis3": {"title": {"text": "KV (MB)"}},
                   "annotations": [{"text": "<b>no abort</b><br>131 MB held for nobody at step 999"}],
                   "meta": {"cursor": {"runs": ["no abort"]}}}}, "KV memory", ())
    assert captions.axes(chart) == [("x", ["time (engine steps)"]), ("y", ["KV (MB)", "KV (% of pool)"])]
    assert captions.legend(chart) == ["wanted", "held by abandoned requests"]
    assert captions.marks(chart, ["abort on disconnect", "no abort"]) == (
        [], ["no abort: 131 MB held for nobody at step 999"])
    assert captions.runs_shown(chart, ["abort on disconnect", "no abort"]) == ["no abort"]
    chart.figure["layout"].pop("meta")
    assert captions.runs_shown(chart, ["abort on disconnect", "no abort"]) == ["abort on disconnect", "no abort"]


def test_a_pages_caption_is_about_the_kind_of_chart_after_it():
    slugs = ["FCFS", "SJF_true_lengths"]
    assert _family("article_hol-kv-SJF_true_lengths", "article_hol", slugs) == "kv"
    assert _family("article_hol-finish-time-distribution", "article_hol", slugs) == "finish-time-distribution"
