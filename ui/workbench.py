"""The Workbench page's Streamlit parts: the editable request table (with its buttons, the generator, a preset's
workload, CSV and JSON in and out, the table in the link), the engine and the runs picked. (The results drawn from
the runs: ``ui/workbench_results.py``.)

The table lives in the session as rows of text (``ui.workbench_table``); the editor is a view of it: each edit is
applied to the rows in the editor's callback and the editor is drawn afresh (a new key), so its check column
always belongs to the rows shown. The runs use the last table without a bad cell.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st

from sim import cost_estimate, presets
from sim.config import MODELS, EngineConfig, field_help, model_name
from sim.request import RequestSpec
from sim.workload import ClientSpec, WorkloadSpec, generate

from . import page
from . import workbench_runs as wr
from . import workbench_table as wt
from .controls import Knob, KnobPanel
from .theme import ChartStyle
from .wording import as_code, count, plain

PAGE = "workbench"
ROWS_KEY = f"{PAGE}.rows"  # list[Row]: the table as typed
VERSION_KEY = f"{PAGE}.editor_version"  # the editor's key suffix: a new one draws the rows afresh
VALID_KEY = f"{PAGE}.last_valid"  # tuple[RequestSpec, ...]: the last table without a bad cell
PICK_KEY = f"{PAGE}.pick_row"  # the row the duplicate and remove buttons act on (1 = the first)
NOTE_KEY = f"{PAGE}.note"  # (kind, text) said once after an action (an import, a preset loaded)
TABLE_PARAM = "table"  # the table in the link
DEFAULT_PRESET = "article_hol"
ENGINE = f"{PAGE}.engine"
RUN_SLOTS = tuple(range(1, wr.MAX_RUNS + 1))
DEFAULT_RUNS = {1: "fcfs", 2: "sjf"}


# ---- the engine and the runs ------------------------------------------------------------------------------------
def engine_knobs(config: EngineConfig) -> list[Knob]:
    model = model_name(config.model) or wr.DEFAULT_MODEL
    return [
        Knob("num_blocks", "KV pool size (blocks)", "int", config.num_blocks, min=1, max=10_000_000, step=1,
             widget="number", help=field_help(EngineConfig, "num_blocks")),
        Knob("block_size", "Block size (tokens)", "int", config.block_size, min=1, max=1024, step=1, widget="number",
             help=field_help(EngineConfig, "block_size")),
        Knob("max_num_seqs", "max_num_seqs (batch slots)", "int", config.max_num_seqs, min=1, max=4096, step=1,
             widget="number", help=field_help(EngineConfig, "max_num_seqs")),
        Knob("budget", "max_num_batched_tokens (token budget per step)", "int", config.max_num_batched_tokens,
             min=1, max=1_000_000, step=64, widget="number", help=field_help(EngineConfig, "max_num_batched_tokens")),
        Knob("chunked", "Chunked prefill", "bool", config.chunked_prefill, widget="toggle",
             help=field_help(EngineConfig, "chunked_prefill")),
        Knob("watermark", "Watermark (share of the pool kept free)", "float", config.watermark, min=0.0,
             max=wr.MAX_WATERMARK, step=0.01, help=field_help(EngineConfig, "watermark")),
        Knob("model", "Model (KV bytes per token, step costs in ms)", "choice", model, options=tuple(MODELS),
             labels={k: m.name for k, m in MODELS.items()}, widget="select", help=field_help(EngineConfig, "model")),
        Knob("unit", "Time axis", "choice", "steps", options=("steps", "ms"),
             labels={"steps": "engine steps", "ms": "milliseconds"}, widget="segmented"),
    ]


DEFAULT_ENGINE = presets.get(DEFAULT_PRESET).scenario.config


def _engine_values(config: EngineConfig) -> dict[str, Any]:
    """The engine knobs' values for ``config`` (a preset's or a file's), by knob key."""
    model = model_name(config.model)
    values = {"num_blocks": config.num_blocks, "block_size": config.block_size, "max_num_seqs": config.max_num_seqs,
              "budget": config.max_num_batched_tokens, "chunked": config.chunked_prefill,
              "watermark": min(config.watermark, wr.MAX_WATERMARK)}
    return values if model is None else {**values, "model": model}


def policy_knob(slot: int) -> Knob:
    options = ("off", *wr.POLICIES)
    return Knob(f"r{slot}", f"Run {slot}", "choice", DEFAULT_RUNS.get(slot, "off"), options=options,
                labels={"off": "—", **{k: v[0] for k, v in wr.POLICIES.items()}}, widget="select",
                help="The waiting-queue policy of this run (every run shares the requests and the engine)")


def option_knobs(slot: int, policy: str) -> list[Knob]:
    """A run's settings: recompute or swap and prefix caching for every policy, then the policy's own (the knobs of
    its record, sim/policies.py, that the Workbench has a setting for; VTC's and LCF's weights: ``_weights_input``)."""
    d = wr.RunChoice(policy)
    out = [
        Knob(f"r{slot}_mode", "On preemption", "choice", d.preemption_mode, options=("recompute", "swap"),
             widget="select", help=field_help(EngineConfig, "preemption_mode")
             + "; swap gets CPU space as large as the GPU pool"),
        Knob(f"r{slot}_prefix", "Prefix caching", "bool", d.prefix_caching, widget="toggle",
             help=field_help(EngineConfig, "enable_prefix_caching")),
    ]
    if "prediction_error_sigma" in d.knobs:
        out.append(Knob(f"r{slot}_sigma", "Prediction error (lognormal sigma)", "float", d.sigma, min=0.0,
                        max=wr.MAX_SIGMA, step=0.05, help=field_help(EngineConfig, "prediction_error_sigma")))
    if "starvation_threshold_steps" in d.knobs:
        out.append(Knob(f"r{slot}_guard", "Starvation guard (steps, 0 = off)", "int", d.guard_steps, min=0,
                        max=wr.MAX_GUARD, step=10, widget="number",
                        help=field_help(EngineConfig, "starvation_threshold_steps")))
    if policy == "rate_limit":
        out += [Knob(f"r{slot}_limit", "Requests per client per window", "int", d.rate_limit, min=1,
                     max=wr.MAX_RATE_LIMIT, step=1, widget="number",
                     help=field_help(EngineConfig, "rate_limit_max_requests")),
                Knob(f"r{slot}_window", "Window (steps)", "int", d.window_steps, min=1, max=wr.MAX_WINDOW, step=10,
                     widget="number", help=field_help(EngineConfig, "rate_limit_window_steps"))]
    return out


def _weights_input(slot: int, box: Any, warnings: list[str]) -> str:
    """VTC's or LCF's weights as text ("A:2, B:1"), kept in the link under ``r<slot>_weights``; a link's that do not
    parse are refused with a warning added to ``warnings`` (drawn under the run columns, where it has room)."""
    key, param = f"{PAGE}.r{slot}_weights", f"r{slot}_weights"
    if key not in st.session_state:
        linked = st.query_params.get(param, "")
        try:
            wr.parse_weights(linked[:200])
        except ValueError as e:  # (as a bad knob in a link: said, and the setting's default; typed ones say so below)
            warnings.append(f"The link's setting {as_code(f'{param}={linked}')} was ignored: {plain(str(e))}. Using "
                            f"no weights for run {slot} (every client weighs 1).")
            linked = ""
        st.session_state[key] = linked[:200]
    value = box.text_input("Client weights (client:weight, ...)", key=key, placeholder="A:2, B:1",
                           help="VTC and LCF divide a client's charges by its weight (weight 2: twice the service); "
                                "clients not named weigh 1")
    if value and st.query_params.get(param) != value:
        st.query_params[param] = value
    elif not value and param in st.query_params:
        del st.query_params[param]
    return value


def pick_runs(style: ChartStyle) -> list[wr.RunChoice]:
    """One column per run slot (two a row in presentation mode): the policy, then its settings. Returns the runs
    switched on."""
    choices, warnings = [], []
    per_row = 2 if style.presentation else len(RUN_SLOTS)
    cols = [col for start in range(0, len(RUN_SLOTS), per_row) for col in st.columns(per_row)]
    for slot, col in zip(RUN_SLOTS, cols, strict=True):
        with col.container(border=True):
            policy = KnobPanel(f"{PAGE}.run", [policy_knob(slot)], PAGE).render(st)[f"r{slot}"]
            if policy == "off":
                st.caption("Pick a policy to add a run.")
                continue
            values = KnobPanel(f"{PAGE}.run", option_knobs(slot, policy), PAGE).render(st)
            weights = _weights_input(slot, st, warnings) if "client_weights" in wr.RunChoice(policy).knobs else ""
            d = wr.RunChoice(policy)
            choices.append(wr.RunChoice(
                policy, values[f"r{slot}_mode"], values[f"r{slot}_prefix"], values.get(f"r{slot}_sigma", d.sigma),
                values.get(f"r{slot}_guard", d.guard_steps), weights, values.get(f"r{slot}_limit", d.rate_limit),
                values.get(f"r{slot}_window", d.window_steps)))
    for warning in warnings:
        st.warning(warning, icon=":material/warning:")
    return choices


def _set_run_one(config: EngineConfig) -> None:
    """Run 1 takes a file's policy and settings (an import: the file's own run comes first)."""
    choice = wr.run_choice_of(config)
    state = st.session_state
    state[f"{PAGE}.run.r1"] = choice.policy
    state[f"{PAGE}.run.r1_mode"] = choice.preemption_mode
    state[f"{PAGE}.run.r1_prefix"] = choice.prefix_caching
    state[f"{PAGE}.run.r1_sigma"] = choice.sigma
    state[f"{PAGE}.run.r1_guard"] = choice.guard_steps
    state[f"{PAGE}.run.r1_limit"] = choice.rate_limit
    state[f"{PAGE}.run.r1_window"] = choice.window_steps
    state[f"{PAGE}.r1_weights"] = choice.weights


# ---- the table --------------------------------------------------------------------------------------------------
def _set_rows(rows: list[wt.Row], note: tuple[str, str] | None = None) -> None:
    st.session_state[ROWS_KEY] = rows
    st.session_state[VERSION_KEY] = st.session_state.get(VERSION_KEY, 0) + 1
    picked = st.session_state.get(PICK_KEY)
    if isinstance(picked, int) and picked > max(len(rows), 1):  # (the row picker's range shrinks with the table)
        st.session_state[PICK_KEY] = max(len(rows), 1)
    if note:
        st.session_state[NOTE_KEY] = note


def _set_engine(config: EngineConfig) -> None:
    for key, value in _engine_values(config).items():
        st.session_state[f"{ENGINE}.{key}"] = value


def initial_rows() -> list[wt.Row]:
    """The table a new session starts with: the link's, else the article's three requests."""
    if ROWS_KEY not in st.session_state:
        rows = wt.rows_of(presets.get(DEFAULT_PRESET).scenario.requests)
        raw = st.query_params.get(TABLE_PARAM)
        if raw is not None:
            try:
                rows = wt.decode_rows(raw)
            except ValueError as e:
                st.warning(f"The link's table was ignored: {plain(str(e))}. Showing the article's three requests "
                           f"instead.", icon=":material/link_off:")
        st.session_state[ROWS_KEY] = rows
    return st.session_state[ROWS_KEY]


def _commit_edits(key: str) -> None:
    """The editor's callback: its edits applied to the rows, and a fresh editor for them; except while a row added
    in the empty last line has nothing typed in it yet (the same editor gets the typed value next)."""
    edits = st.session_state.get(key) or {}
    if wt.only_blank_rows_added(edits):
        return
    _set_rows(wt.apply_edits(st.session_state[ROWS_KEY], edits))


def _editor_frame(rows: Sequence[wt.Row], problems: Sequence[wt.CellProblem]) -> Any:
    by_row: dict[int, list[str]] = {}
    for p in problems:
        by_row.setdefault(p.row, []).append(f"{wt.LABELS[p.column]}: {p.message}")
    frame = pd.DataFrame([{"row": i + 1, "check": ("⚠ " + " · ".join(by_row[i])) if i in by_row else "✓",
                           **{k: wt.text(r.get(k)) for k in wt.KEYS}}
                          for i, r in enumerate(rows)], columns=["row", "check", *wt.KEYS])
    return frame.style.map(lambda v: "background-color: #FDE2E1; color: #8A1C1C" if v.startswith("⚠") else "",
                           subset=["check"])


NUMERIC = ("arrival_step", "prompt_len", "output_len", "priority", "abort_step", "prefix_len", "arrival_ms")


def editor(rows: Sequence[wt.Row], problems: Sequence[wt.CellProblem], style: ChartStyle) -> None:
    key = f"{PAGE}.editor.{st.session_state.get(VERSION_KEY, 0)}"
    # Narrow row and check columns (the messages are listed in full under the table), so that more of the request's
    # columns show beside them at 1,280 px; the optional ones on the right are a sideways scroll away (said below).
    config = {"row": st.column_config.NumberColumn("row", disabled=True, width=48, pinned=True),
              "check": st.column_config.TextColumn("check", disabled=True, width=130, pinned=True,
                                                   help="What is wrong with the row's cells, and what is allowed")}
    for col in wt.COLUMNS:
        config[col.key] = st.column_config.TextColumn(
            col.label, help=col.help + (f" (a whole number from {col.lo:,} to {col.hi:,})" if col.lo is not None
                                        else ""), alignment="right" if col.key in NUMERIC else "left")
    st.data_editor(_editor_frame(rows, problems), key=key, num_rows="dynamic", hide_index=True,
                   column_config=config, on_change=_commit_edits, args=(key,),
                   height=page.table_height(len(rows) + 1, style, max_px=460))
    st.caption("Scroll the table sideways for priority, the abandon step, the shared prefix (group, tokens) and an "
               "arrival time in ms (instead of the arrival step); "
               "hover over a column's head for what it takes. Type in the empty last line to add a request.")


def row_buttons(rows: Sequence[wt.Row]) -> None:
    """Add a row; duplicate or remove the row picked."""
    with st.container(horizontal=True, vertical_alignment="bottom"):
        st.button("Add a row", key=f"{PAGE}.add", icon=":material/add:",
                  on_click=lambda: _set_rows([*st.session_state[ROWS_KEY], wt.new_row(st.session_state[ROWS_KEY])]))
        picked = st.number_input("Row", min_value=1, max_value=max(len(rows), 1), step=1, key=PICK_KEY,
                                 width=110, help="The row to duplicate or remove")
        st.button("Duplicate it", key=f"{PAGE}.duplicate", icon=":material/content_copy:", disabled=not rows,
                  on_click=_duplicate, args=(int(picked) - 1,))
        st.button("Remove it", key=f"{PAGE}.remove", icon=":material/delete:", disabled=not rows,
                  on_click=_remove, args=(int(picked) - 1,))


def _duplicate(index: int) -> None:
    rows = st.session_state[ROWS_KEY]
    if 0 <= index < len(rows) < wt.MAX_ROWS:
        _set_rows(wt.duplicate_row(rows, index))


def _remove(index: int) -> None:
    rows = st.session_state[ROWS_KEY]
    if 0 <= index < len(rows):
        _set_rows([r for i, r in enumerate(rows) if i != index])


def generator_form() -> None:
    """The seeded generator's knobs; "Fill the table" writes its requests as rows to edit."""
    with st.expander("Fill from the generator", icon=":material/casino:"), st.form(f"{PAGE}.generator", border=False):
        c1, c2, c3 = st.columns(3)
        n = c1.number_input("Requests", 1, wt.MAX_ROWS, 20, key=f"{PAGE}.gen.n")
        rate = c1.number_input("Arrival rate (requests per step)", 0.001, 100.0, 0.05, step=0.01, format="%.3f",
                               key=f"{PAGE}.gen.rate", help="Average arrivals per engine step (Poisson)")
        seed = c1.number_input("Random seed", 0, 2**32 - 1, 0, key=f"{PAGE}.gen.seed",
                               help="Same seed, same requests")
        prompt = c2.number_input("Prompt length, median (tokens)", 1, 100_000, 200, key=f"{PAGE}.gen.prompt")
        answer = c2.number_input("Answer length, median (tokens)", 1, 100_000, 150, key=f"{PAGE}.gen.answer")
        sigma = c2.number_input("Length spread (lognormal sigma)", 0.0, 3.0, 0.8, step=0.1, key=f"{PAGE}.gen.sigma",
                                help="0 = every request the median; larger = a longer tail")
        clients = c3.number_input("Clients (A, B, ...)", 1, 8, 1, key=f"{PAGE}.gen.clients")
        share = c3.number_input("Client A's share of the traffic (%)", 0, 100, 50, key=f"{PAGE}.gen.share",
                                help="The others split the rest equally")
        abandon = c3.number_input("Users who abandon (%)", 0, 100, 0, key=f"{PAGE}.gen.abandon",
                                  help="They close the tab part-way through the answer")
        if st.form_submit_button("Fill the table", icon=":material/table_rows:"):
            _fill(int(n), float(rate), int(seed), int(prompt), int(answer), float(sigma), int(clients), share / 100,
                  abandon / 100)
            st.rerun()


def _fill(n: int, rate: float, seed: int, prompt: int, answer: int, sigma: float, num_clients: int, share: float,
          abandon: float) -> None:
    names = [chr(ord("A") + i) for i in range(num_clients)]
    rest = (1 - share) / (num_clients - 1) if num_clients > 1 else 0.0
    clients = tuple(ClientSpec(c, share if i == 0 else rest) for i, c in enumerate(names)) if num_clients > 1 \
        else (ClientSpec(),)
    try:
        spec = WorkloadSpec(num_requests=n, rate_per_step=rate, prompt_median=prompt, prompt_sigma=sigma,
                            output_median=answer, output_sigma=sigma, clients=clients, abandon_rate=abandon,
                            seed=seed)
        specs = generate(spec)
    except ValueError as e:
        st.session_state[NOTE_KEY] = ("error", f"The generator cannot make these requests: {e}")
        return
    _set_rows(wt.rows_of(specs), ("success", f"The table now holds the generator's {count(n, 'request')} "
                                             f"(seed {seed}); edit any cell."))


@st.cache_data(show_spinner=False)
def _preset_titles() -> dict[str, str]:
    """Every preset's key and "Lesson: title" (cached: building the presets generates every workload, ~30 ms)."""
    return {k: f"{p.lesson.capitalize()}: {p.title}" for k, p in presets.all_presets().items()}


def preset_picker() -> None:
    """Any lesson's preset: its requests become the rows and its engine the page's."""
    titles = _preset_titles()
    with st.expander("Start from a preset's workload", icon=":material/library_books:"):
        with st.container(horizontal=True, vertical_alignment="bottom"):
            key = st.selectbox("Preset", list(titles), key=f"{PAGE}.preset", format_func=titles.get)
            st.button("Load its workload and engine", key=f"{PAGE}.load_preset", icon=":material/download:",
                      on_click=_load_preset, args=(key,))
        st.caption("Its requests replace the table (a generated workload as its rows), and its engine settings "
                   "(pool, slots, budget, chunking, model) replace the sidebar's. The runs you picked stay.")


def _load_preset(key: str) -> None:
    preset = presets.get(key)
    requests = preset.scenario.requests
    if len(requests) > wt.MAX_ROWS:
        st.session_state[NOTE_KEY] = ("error", f"{preset.title} has {len(requests):,} requests; the table holds at "
                                               f"most {wt.MAX_ROWS:,}.")
        return
    _set_engine(preset.scenario.config)
    _set_rows(wt.rows_of(requests), ("success", f"Loaded {plain(preset.title)}: {count(len(requests), 'request')}, "
                                                f"with its engine settings."))


def first_config(choices: Sequence[wr.RunChoice], engine: EngineConfig) -> EngineConfig | None:
    """Run 1's config, for the JSON download (None without a run, or while one of its settings is bad: the runs
    below say which)."""
    try:
        return choices[0].config(engine) if choices else None
    except ValueError:
        return None


def import_export(rows: Sequence[wt.Row], specs: Sequence[RequestSpec], run_config: EngineConfig | None) -> None:
    with st.expander("Import and export (CSV, scenario JSON)", icon=":material/swap_vert:"):
        st.file_uploader("Import a table (CSV) or a scenario (JSON)", type=["csv", "json"], key=f"{PAGE}.import",
                         on_change=_import, help="CSV: the columns of the CSV download. JSON: the format of "
                                                 "`python -m sim run` and of every page's scenario download.")
        c1, c2 = st.columns(2)
        c1.download_button("Table (CSV)", wt.to_csv(rows), file_name="scheduler-lab-workbench.csv", mime="text/csv",
                           key=f"{PAGE}.dl_csv", icon=":material/table:", width="stretch")
        if run_config is not None and specs:
            c2.download_button("Scenario (JSON, run 1's settings)",
                               lambda: wt.scenario_json(specs, run_config, "Scheduler Lab workbench"),
                               file_name="scheduler-lab-workbench.json", mime="application/json",
                               key=f"{PAGE}.dl_json", icon=":material/data_object:", width="stretch")
        st.caption("The CSV holds the table as typed. The JSON holds the requests the runs use with run 1's policy "
                   "and the engine: load it here or on any lesson, or run it with `python -m sim run FILE`; each "
                   "run's own file is under *Take it with you* at the bottom.")


def _import() -> None:
    file = st.session_state.get(f"{PAGE}.import")
    if file is None:
        return
    data = file.getvalue()
    try:
        content = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        st.session_state[NOTE_KEY] = ("error", f"{plain(file.name, 60)} is not UTF-8 text; import a CSV or JSON file.")
        return
    try:
        if file.name.lower().endswith(".json"):
            scenario = wt.from_json(content)
            _set_engine(scenario.config)
            _set_run_one(scenario.config)
            dropped = wt.dropped_fields(scenario.requests) + [f"config.{name}" for name in
                                                               wr.config_not_kept(scenario.config)]
            lost = f" Not kept (the workbench has no place for them): {', '.join(dropped)}." if dropped else ""
            _set_rows(wt.rows_of(scenario.requests), ("success", f"Imported {plain(scenario.name, 60)}: "
                      f"{count(len(scenario.requests), 'request')}, its engine settings and its policy as run 1."
                      + lost))
        else:
            rows = wt.from_csv(content)
            _set_rows(rows, ("success", f"Imported {count(len(rows), 'row')} from {plain(file.name, 60)}."))
    except ValueError as e:
        st.session_state[NOTE_KEY] = ("error", f"{plain(file.name, 60)} was not imported: {plain(str(e), 400)}. "
                                               f"The table is as it was.")


def show_note() -> None:
    note = st.session_state.pop(NOTE_KEY, None)
    if note:
        kind, text = note
        (st.error if kind == "error" else st.success)(text, icon=":material/info:")


def sync_link(rows: Sequence[wt.Row]) -> None:
    """The table in the link when it is small enough; otherwise say that the JSON file is the way to share it."""
    encoded = wt.encode_rows(rows)
    if encoded is None:
        if TABLE_PARAM in st.query_params:
            del st.query_params[TABLE_PARAM]
        st.caption(f":material/link_off: The table has {len(rows):,} rows: a link holds a table of up to "
                   f"{wt.URL_MAX_ROWS} rows, so this page's link carries the settings but not the requests. Share "
                   f"the scenario JSON (Import and export) instead.")
    elif st.query_params.get(TABLE_PARAM) != encoded:
        st.query_params[TABLE_PARAM] = encoded


LIMITS = (f"**Limits:** the table holds up to {wt.MAX_ROWS:,} requests ({wt.URL_MAX_ROWS} in a link); prompts and "
          f"answers up to 10,000,000 tokens each, arrivals up to step {wt.MAX_STEPS - 1:,}; each run at most "
          f"{cost_estimate.PAGE_LIMITS.max_tokens:,} tokens in all, {cost_estimate.PAGE_LIMITS.max_clients} clients "
          f"and an estimated {cost_estimate.PAGE_LIMITS.max_steps:,} engine steps (as for an uploaded scenario). "
          f"Larger workloads: export the JSON and run it with `python -m sim run FILE`.")


@dataclass(frozen=True)
class Table:
    rows: list[wt.Row]
    specs: tuple[RequestSpec, ...]  # the requests the runs use: this table's, or the last valid one's (or none)
    is_current: bool  # the runs use the table as shown (no bad cell)


def checked_table(rows: list[wt.Row], engine: EngineConfig, style: ChartStyle) -> Table:
    """The editor with its check column, the problems listed, and the requests the runs use."""
    checked = wt.check_rows(rows, engine)
    editor(rows, checked.problems, style)
    row_buttons(rows)
    if checked.is_valid:
        st.session_state[VALID_KEY] = checked.specs
        return Table(rows, checked.specs, True)
    listed = "\n".join(f"- row {p.row + 1}, {wt.LABELS[p.column]}: {plain(p.message, 400)}"  # (cells as typed)
                       for p in checked.problems[:12])
    more = len(checked.problems) - 12
    st.error(f"**{count(len(checked.problems), 'cell')} to fix** (marked ⚠ in the check column):\n{listed}"
             + (f"\n- and {more:,} more" if more > 0 else ""), icon=":material/error:")
    last = st.session_state.get(VALID_KEY)
    if not last:  # (the page goes on: the generator, a preset or an import can replace the table)
        st.info("The runs start once every cell is valid.", icon=":material/hourglass_empty:")
        return Table(rows, (), False)
    st.warning(f"The runs below use the last valid table ({count(len(last), 'request')}), not the one above: fix "
               f"the marked cells to run it.", icon=":material/history:")
    return Table(rows, last, False)
