"""Workbench: build a workload by hand (or from the generator, a preset, a file) and run any policies side by side."""

import streamlit as st

from ui import page
from ui import workbench as wb
from ui import workbench_results as results
from ui import workbench_runs as wr
from ui.controls import KnobPanel

style = page.setup("Workbench")
st.title("Workbench: your own requests, any policies")
st.markdown(
    "Build a workload request by request (or fill the table from the generator, a preset or a file), pick up to "
    "four runs, and compare them on the same requests and the same engine: who ran when, the KV cache, the queues, "
    "and each request's time to first token and time between tokens.")

st.sidebar.subheader("Engine (every run)")
values = KnobPanel(wb.ENGINE, wb.engine_knobs(wb.DEFAULT_ENGINE), wb.PAGE).render(st.sidebar)
engine = page.guarded(lambda: wr.engine_config(values["num_blocks"], values["block_size"], values["max_num_seqs"],
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

runs = results.run_all(table.specs, engine, choices)
results.headline(runs, unit)
player_slot = results.charts_section(runs, unit, style)
results.latency_section(runs, unit, style)
results.footer(runs, style)
results.show_player(runs, unit, player_slot)
