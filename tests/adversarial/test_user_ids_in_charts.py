"""Request and client ids from a file are text in charts: plotly renders a subset of HTML in labels, legends and
hovers and reads %{...} in a hover template, so a hostile id must reach the figure escaped."""

from __future__ import annotations

from sim import EngineConfig, RequestSpec
from sim.engine import simulate
from ui.charts.gantt import gantt
from ui.charts.timeseries import client_counters
from ui.theme import ChartStyle
from ui.wording import chart_ids, chart_text

HOSTILE = '<img src="http://evil.example/x.png">'
TEMPLATE = "%{y}<b>bold</b>"


def _strings(value) -> list[str]:
    """Every string in a figure's dict, arrays of strings included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list | tuple) or (hasattr(value, "tolist") and not isinstance(value, bytes)):
        items = value.tolist() if hasattr(value, "tolist") else value
        return [s for v in (items if isinstance(items, list) else [items]) for s in _strings(v)]
    return []


def test_chart_text_escapes_what_plotly_would_render_and_cuts():
    assert chart_text(HOSTILE) == "&lt;img src=\"http://evil.example/x.png\"&gt;"
    assert chart_text(TEMPLATE) == "&#37;{y}&lt;b&gt;bold&lt;/b&gt;"
    assert chart_text("a & b") == "a &amp; b"
    assert chart_ids(["r12", "client-A", "x/y:1"]) == ["r12", "client-A", "x/y:1"]  # plain ids pass untouched
    assert chart_text("x" * 50) == "x" * 40 + "…"


def test_hostile_ids_reach_the_figures_escaped():
    specs = [RequestSpec(HOSTILE, 0, 8, 6, client_id=TEMPLATE), RequestSpec("r1", 0, 8, 6, client_id="B")]
    trace = simulate(EngineConfig(num_blocks=4, block_size=4, max_num_seqs=2), specs)
    style = ChartStyle()
    shown = {"gantt": (gantt(trace, style), ["&lt;img", "&#37;{y}&lt;b&gt;"]),
             "counters": (client_counters(trace, style), ["&#37;{y}&lt;b&gt;"])}
    for name, (fig, escaped) in shown.items():
        text = "\n".join(_strings(fig.to_dict()))  # (not to_json: it writes '<' as \u003c)
        assert "<img" not in text and "%{y}<b>" not in text, name
        assert all(e in text for e in escaped), name
