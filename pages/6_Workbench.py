"""Workbench: build a workload by hand (or from the generator, a preset, a file) and run any policies side by side."""

import streamlit as st

from ui import page
from ui import workbench as wb
from ui import workbench_table as wt
from ui.controls import KnobPanel

style = page.setup("Workbench")
st.title("Workbench: your own requests, any policies")
st.markdown(
    "Build a workload request by request (or fill the table from the generator, a preset or a file), pick up to "
    "four runs, and compare them on the same requests and the same engine: who ran when, the KV cache, the queues, "
    "and each request's time to first token and time between tokens.")

st.sidebar.subheader("Engine (every run)")
values = KnobPanel(wb.ENGINE, wb.engine_knobs(wb.DEFAULT_ENGINE), wb.PAGE).render(st.sidebar)
engine = page.guarded(lambda: wt.engine_config(values["num_blocks"], values["block_size"], values["max_num_seqs"],
                                               values["budget"], values["chunked"], values["watermark"],
                                               values["model"]))
unit = values["unit"]

st.subheader("The requests")
rows = wb.initial_rows()
wb.show_note()
table = wb.checked_table(rows, engine, style)
wb.generator_form()
wb.preset_picker()
st.subheader("The runs")
choices = wb.pick_runs(style)
wb.import_export(rows, table.specs, wb.first_config(choices, engine))
wb.sync_link(rows)
st.caption(wb.LIMITS)

runs = wb.run_all(table.specs, engine, choices)
wb.headline(runs, unit)
player_slot = wb.charts_section(runs, unit, style)
wb.latency_section(runs, unit, style)
wb.footer(runs, style)
wb.show_player(runs, unit, player_slot)
