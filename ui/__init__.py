"""Scheduler Lab's Streamlit side: figure builders (ui.charts, pure plotly), widgets and URL state
(ui.controls), the cached simulator runner (ui.runner), page setup and theme (ui.page, ui.theme)."""
