"""Pure plotly figure builders shared by every page: each takes traces or frames plus a ``ChartStyle`` and returns a
``go.Figure`` (or a frame, for tables); none calls Streamlit or mutates its inputs. ``layout.styled_layout`` is the
one place fonts, margins, legend and template are set.
"""

from ui.charts.distributions import finish_time_ecdf, latency_by_client
from ui.charts.engine_step import engine_step
from ui.charts.gantt import arrival_order, gantt
from ui.charts.layout import downsample, label_colors, time_extent
from ui.charts.segments import STATES, request_segments
from ui.charts.sweep import sweep_lines
from ui.charts.tables import METRIC_COLUMNS, metrics_table
from ui.charts.timeseries import client_counters, kv_occupancy, queue_and_batch

__all__ = [
    "METRIC_COLUMNS",
    "STATES",
    "arrival_order",
    "client_counters",
    "downsample",
    "engine_step",
    "finish_time_ecdf",
    "gantt",
    "kv_occupancy",
    "label_colors",
    "latency_by_client",
    "metrics_table",
    "queue_and_batch",
    "request_segments",
    "sweep_lines",
    "time_extent",
]
