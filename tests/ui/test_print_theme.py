"""The print theme (ChartStyle(printed=True), the Display panel's "Print" chart theme, what `python -m ui.notes`
exports): a fixed figure size, larger text, titles that fit on one line and name the lesson and preset under them,
and the camera button saving that size."""

from __future__ import annotations

from sim import metrics, presets
from sim.engine import simulate
from ui import charts
from ui.charts import cancellation
from ui.charts import fairness as fairness_charts
from ui.charts.layout import MIN_TITLE_SIZE, styled_layout
from ui.theme import PRINT_TITLE_EXTRA, PRINT_WIDTH, ChartStyle, plotly_config

PRINT = ChartStyle(printed=True, figure_label="Queueing · Article: one slot, answers of 1,000/100/100 steps")


def test_a_print_figure_has_a_fixed_size_larger_text_and_names_its_lesson_and_preset():
    layout = styled_layout(PRINT, title="FCFS", x_title="time (engine steps)", y_title="requests", height=400)
    screen = styled_layout(ChartStyle(), title="FCFS", x_title="time (engine steps)", y_title="requests", height=400)
    assert layout["width"] == PRINT_WIDTH and "width" not in screen
    assert layout["height"] == 500 + PRINT_TITLE_EXTRA and screen["height"] == 400
    assert layout["font"]["size"] > screen["font"]["size"]
    assert layout["title"]["subtitle"]["text"] == PRINT.figure_label
    assert "subtitle" not in screen["title"]


def test_a_long_title_gets_smaller_text_and_a_long_label_wraps():
    long = "Bringing back a 160-token victim (10 blocks, 21 MB of KV), and then some more words"
    layout = styled_layout(PRINT, title=long, x_title=None, y_title=None)
    size = layout["title"]["font"]["size"]
    assert MIN_TITLE_SIZE <= size < PRINT.title_size
    assert "<br>" not in layout["title"]["text"]  # (plotly draws a title of several lines over the top edge)
    label = ChartStyle(printed=True, figure_label="Token budget · " + "an 8,000-token prompt among eight streams " * 2)
    subtitle = styled_layout(label, title="t", x_title=None, y_title=None)["title"]["subtitle"]["text"]
    assert all(len(line) <= label.chars_per_line(label.font_size - 3) for line in subtitle.split("<br>"))


def test_a_builders_own_subtitle_keeps_its_place_above_the_label():
    layout = styled_layout(PRINT, title="t", x_title=None, y_title=None,
                           layout={"title": {"subtitle": {"text": "1 user who stayed"}}})
    assert layout["title"]["subtitle"]["text"] == f"1 user who stayed<br>{PRINT.figure_label}"


def test_the_camera_button_saves_the_print_size():
    image = plotly_config("name", PRINT, (PRINT_WIDTH, 560))["toImageButtonOptions"]
    assert (image["width"], image["height"], image["scale"]) == (PRINT_WIDTH, 560, 3)
    assert "width" not in plotly_config("name", ChartStyle())["toImageButtonOptions"]


def test_every_builder_draws_at_the_print_width():
    p = presets.get("article_hol")
    traces = {label: simulate(p.scenario.config.replace(**over), p.scenario.requests) for label, over in p.variants}
    first = next(iter(traces.values()))
    for fig in (charts.gantt(first, PRINT), charts.kv_occupancy(first, PRINT), charts.finish_time_ecdf(traces, PRINT),
                charts.queue_and_batch(traces, PRINT)):
        assert fig.layout.width == PRINT_WIDTH
        assert fig.layout.title.subtitle.text == PRINT.figure_label


def test_the_waste_panels_stack_in_print_and_stay_side_by_side_on_screen():
    p = presets.get("article_abandon")
    summaries = {label: metrics.summary(simulate(p.scenario.config.replace(**over), p.scenario.requests))
                 for label, over in p.variants}
    styles = cancellation.server_styles({label: p.scenario.config.replace(**over) for label, over in p.variants})
    printed = cancellation.waste_bars(summaries, PRINT, styles=styles).layout
    screen = cancellation.waste_bars(summaries, ChartStyle(), styles=styles).layout
    assert printed.yaxis.domain[0] > printed.yaxis3.domain[1]  # panels one above the other
    assert screen.xaxis.domain[1] < screen.xaxis3.domain[0]  # side by side


def test_in_print_each_clients_line_has_a_dash_of_its_own():
    p = presets.get("article_fairness")
    traces = {label: simulate(p.scenario.config.replace(**over), p.scenario.requests) for label, over in p.variants}
    for build in (fairness_charts.counters_by_policy, fairness_charts.client_rates_by_policy):
        def dashes(style, build=build):
            return {t.name: t.line.dash for t in build(traces, style).data if t.name and t.name.startswith("client")}
        assert dashes(PRINT) == {"client A": "solid", "client B": "dash"}
        assert set(dashes(ChartStyle()).values()) == {"solid"}


def test_in_print_a_long_x_axis_title_takes_two_lines_and_the_heatmap_keeps_room_for_the_label():
    layout = styled_layout(PRINT, title="t", x_title="VTC output weight (charge per output token; input weight 1, "
                           "log scale)", y_title="mean finish time (ms)")
    assert layout["xaxis"]["title"]["text"].count("<br>") == 1
    assert "<br>" not in styled_layout(ChartStyle(), title="t", x_title="a" * 90, y_title=None)["xaxis"]["title"][
        "text"]
    assert PRINT.subtitle_px > 0 and ChartStyle().subtitle_px == 0
