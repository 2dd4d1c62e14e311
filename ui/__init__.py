"""Scheduler Lab's Streamlit side: figure builders (ui.charts, pure plotly), widgets and URL state
(ui.controls), the cached simulator runner (ui.runner), page setup and theme (ui.page, ui.theme)."""

# Imported whole when the package is first imported, which every session's thread waits for: plotly imports pandas
# lazily while drawing, and two sessions' threads doing that at once on a fresh server saw "partially initialized
# module 'pandas'" (benchmarks/class_load.py, 10 students opening pages together).
import pandas  # noqa: F401, E402
import plotly.graph_objects  # noqa: F401, E402
