"""The Workbench's logic, without Streamlit: the request table (rows of text, as typed) and its checks cell by
cell, rows to ``RequestSpec`` and back, CSV and scenario JSON in and out, and the compact encoding of a small table
in the URL. (The runs a student picks and their configs: ``ui/workbench_runs.py``.)

A row is a dict from column key to the text typed in the cell (None or "" = empty). ``check_rows`` turns rows into
request specs and lists every bad cell as a ``CellProblem`` (row, column, message with the allowed range): a bad
cell never throws away the other rows, and the page keeps running the last table that had none.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from sim import cost_estimate
from sim import scenario as scenario_io
from sim.admission import rejection_message, rejection_reason
from sim.config import EngineConfig
from sim.events import RejectReason
from sim.request import MAX_LEN_TOKENS, MAX_PRIORITY, RequestSpec
from sim.scenario import Scenario, ScenarioError
from sim.untrusted import decimal_number, from_spreadsheet_cell, spreadsheet_cell, whole_number

from .wording import count


class Column(NamedTuple):
    key: str  # the CSV header and the scenario file's request key
    label: str  # the editor's column head
    help: str
    lo: int | None = None  # whole-number columns: the allowed range
    hi: int | None = None


MAX_ROWS = 2_000  # requests the table holds at most (an editable grid past that is no longer a table to edit)
URL_MAX_ROWS = 50  # a table of at most this many rows lives in the link; past it, the JSON file is the way
MAX_ID_CHARS = 64
MAX_STEPS = cost_estimate.PAGE_LIMITS.max_steps  # a run's max_steps here (as for an uploaded scenario)
MAX_TIME_MS = 1_000_000_000  # an arrival time at most (~12 days of the run's clock: past any run the app makes)

COLUMNS: tuple[Column, ...] = (
    Column("id", "id", "A unique name for the request"),
    Column("client", "client", "Who sent it (fairness policies count per client); empty = default"),
    Column("arrival_step", "arrival step", "Engine step it arrives at", 0, MAX_STEPS - 1),
    Column("prompt_len", "prompt tokens", "Prompt length, tokens (shared prefix included)", 1, MAX_LEN_TOKENS),
    Column("output_len", "answer tokens", "Answer length, tokens", 1, MAX_LEN_TOKENS),
    Column("priority", "priority", "Lower runs first under the priority policy (vLLM's order); empty = 0",
           -MAX_PRIORITY, MAX_PRIORITY),
    Column("abort_step", "abandon step", "Step the user closes the tab (empty = never); at or after arrival",
           0, MAX_STEPS - 1),
    Column("prefix_group", "prefix group", "Requests of one group share their first prefix tokens (empty = none)"),
    Column("prefix_len", "prefix tokens", "Shared prefix length, tokens, at most the prompt; needs a group", 0,
           MAX_LEN_TOKENS),
    # (last, so that the links made before it read the same: a row's cells are positional there)
    Column("arrival_ms", "arrival ms", "Instead of an arrival step: the time it arrives on the run's clock, ms (a "
                                       "number from 0); it arrives at the first step whose start reaches it"),
)
KEYS = tuple(c.key for c in COLUMNS)
LABELS = {c.key: c.label for c in COLUMNS}
_BY_KEY = {c.key: c for c in COLUMNS}
Row = dict[str, str | None]


@dataclass(frozen=True)
class CellProblem:
    row: int  # 0-based position in the table
    column: str  # a column key
    message: str  # what is wrong and what is allowed

    def __str__(self) -> str:
        return f"row {self.row + 1}, {LABELS[self.column]}: {self.message}"


# ---- cells ------------------------------------------------------------------------------------------------------
def text(value: Any) -> str:
    """A cell's text: None and NaN (pandas' empty cell) are empty; numbers as typed, 3.0 as 3."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


_WHOLE = re.compile(r"\+?(-?[0-9][0-9,_]*)(?:\.0*)?")


def parse_whole(raw: str, lo: int, hi: int) -> int:
    """The whole number ``raw`` spells ("1,000", "1000", "12.0", "1e3"), from ``lo`` to ``hi``: ASCII digits only,
    read by ``sim.untrusted`` (no '²', no 5,000 digits); ValueError says what is allowed."""
    allowed = f"a whole number from {lo:,} to {hi:,}"
    if m := _WHOLE.fullmatch(raw):
        digits = m[1].replace(",", "").replace("_", "")
        try:
            value = whole_number(digits, -(10**18), 10**18)
        except ValueError:
            raise ValueError(f"{allowed}, got {raw[:20]!r}") from None
    else:
        try:
            number = decimal_number(raw.replace(",", ""), -1e18, 1e18)
        except ValueError:
            raise ValueError(f"{allowed}, got {raw[:20]!r}") from None
        if not number.is_integer():
            raise ValueError(f"{allowed} (not a fraction), got {raw[:20]!r}") from None
        value = int(number)
    if not lo <= value <= hi:
        raise ValueError(f"{allowed}, got {value:,}")
    return value


def parse_time(raw: str) -> float:
    """The time in ms ``raw`` spells ("1,250.5", "12"), from 0; ValueError says what is allowed."""
    try:
        value = float(raw.replace(",", "").replace("_", ""))
    except ValueError:
        raise ValueError(f"a time in ms from 0, got {raw[:20]!r}") from None
    if not 0 <= value <= MAX_TIME_MS:  # (NaN fails the compare)
        raise ValueError(f"a time in ms from 0 to {MAX_TIME_MS:,}, got {raw[:20]!r}")
    return value


def time_text(ms: float) -> str:
    """A time as the table shows it: 12.5, 3 (not 3.0)."""
    return str(int(ms)) if ms.is_integer() else repr(ms)


def _cell_value(row: Row, key: str, problems: list[CellProblem], index: int) -> Any:
    raw = text(row.get(key))
    col = _BY_KEY[key]
    if key == "id":
        if not raw:
            problems.append(CellProblem(index, key, "required: a name for the request"))
        elif len(raw) > MAX_ID_CHARS:
            problems.append(CellProblem(index, key, f"at most {MAX_ID_CHARS} characters, got {len(raw):,}"))
        return raw
    if key == "client":
        if len(raw) > MAX_ID_CHARS:
            problems.append(CellProblem(index, key, f"at most {MAX_ID_CHARS} characters, got {len(raw):,}"))
        return raw or "default"
    if key == "prefix_group":
        if len(raw) > MAX_ID_CHARS:
            problems.append(CellProblem(index, key, f"at most {MAX_ID_CHARS} characters, got {len(raw):,}"))
        return raw or None
    if not raw:
        if key in ("prompt_len", "output_len"):  # (an arrival, step or time, is checked in the row)
            problems.append(CellProblem(index, key, f"required: a whole number from {col.lo:,} to {col.hi:,}"))
        return {"priority": 0, "prefix_len": 0}.get(key)
    try:
        return parse_time(raw) if key == "arrival_ms" else parse_whole(raw, col.lo, col.hi)
    except ValueError as e:
        problems.append(CellProblem(index, key, str(e)))
        return None


def _arrival_problem(row: Row, index: int) -> CellProblem | None:
    """The row gives no arrival, both (a step and a time), or a time with an abandon step."""
    step, ms, abort = (bool(text(row.get(k))) for k in ("arrival_step", "arrival_ms", "abort_step"))
    col = _BY_KEY["arrival_step"]
    if not step and not ms:
        return CellProblem(index, "arrival_step", f"required: a whole number from {col.lo:,} to {col.hi:,} (or a "
                                                  f"time in {LABELS['arrival_ms']})")
    if step and ms:
        return CellProblem(index, "arrival_ms", f"give an {LABELS['arrival_step']} or a time in "
                                                f"{LABELS['arrival_ms']}, not both")
    if ms and abort:
        return CellProblem(index, "abort_step", f"empty for a request given a time ({LABELS['arrival_ms']}): its "
                                                f"arrival step is known only once it arrives")
    return None


def _row_spec(values: dict[str, Any], index: int, problems: list[CellProblem]) -> RequestSpec | None:
    """The row's spec once each cell is valid alone: the rules between cells of one row, then the spec."""
    arrival, abort, prompt, prefix = (values[k] for k in ("arrival_step", "abort_step", "prompt_len", "prefix_len"))
    if abort is not None and arrival is not None and abort < arrival:
        problems.append(CellProblem(index, "abort_step", f"at or after the arrival step ({arrival:,}), or empty for "
                                                         f"never; got {abort:,}"))
        return None
    if prefix and prompt is not None and prefix > prompt:
        problems.append(CellProblem(index, "prefix_len", f"at most the prompt ({prompt:,} tokens), got {prefix:,}"))
        return None
    if prefix and values["prefix_group"] is None:
        problems.append(CellProblem(index, "prefix_group", f"required when prefix tokens is {prefix:,}: name the "
                                                           f"group of requests that share the prefix"))
        return None
    if (arrival is None and values["arrival_ms"] is None) or any(values[k] is None for k in (
            "prompt_len", "output_len")) or not values["id"]:
        return None
    try:
        return RequestSpec(values["id"], arrival, values["prompt_len"], values["output_len"],
                           client_id=values["client"], priority=values["priority"], abort_step=abort,
                           prefix_group=values["prefix_group"], prefix_len=prefix or 0,
                           arrival_ms=values["arrival_ms"])
    except ValueError as e:  # (a rule the cells above do not check alone: said in RequestSpec's words)
        problems.append(CellProblem(index, "id", str(e)))
        return None


class Checked(NamedTuple):
    specs: tuple[RequestSpec, ...]  # every row's request, when there is no problem (else the rows that are fine)
    problems: tuple[CellProblem, ...]

    @property
    def is_valid(self) -> bool:
        return not self.problems and bool(self.specs)


def check_rows(rows: Sequence[Row], config: EngineConfig) -> Checked:
    """Every row's cells checked alone, then within the row, then against the other rows (unique ids) and the
    engine (a request that can never run on ``config``: the pool, the token budget, max_model_len)."""
    problems: list[CellProblem] = []
    if not rows:
        return Checked((), (CellProblem(0, "id", "the table is empty: add at least one request"),))
    if len(rows) > MAX_ROWS:
        return Checked((), (CellProblem(MAX_ROWS, "id", f"the table holds at most {MAX_ROWS:,} requests, got "
                                                        f"{len(rows):,}"),))
    specs: list[RequestSpec] = []
    first_row: dict[str, int] = {}
    for i, row in enumerate(rows):
        values = {key: _cell_value(row, key, problems, i) for key in KEYS}
        if values["id"] in first_row:
            problems.append(CellProblem(i, "id", f"{values['id']!r} is also row {first_row[values['id']] + 1}'s id; "
                                                 f"ids must be unique"))
            continue
        if values["id"]:
            first_row[values["id"]] = i
        arrival = _arrival_problem(row, i)
        if arrival:
            problems.append(arrival)
            continue
        spec = _row_spec(values, i, problems)
        if spec is None:
            continue
        never = never_runs(spec, config, i)
        if never:
            problems.append(never)
            continue
        specs.append(spec)
    problems.sort(key=lambda p: (p.row, KEYS.index(p.column)))
    return Checked(tuple(specs), tuple(problems))


def never_runs(spec: RequestSpec, config: EngineConfig, index: int) -> CellProblem | None:
    """Why row ``index`` can never run on ``config`` (the engine would reject it on arrival), at the cell to change
    and with what fits; None if it can run."""
    reason = rejection_reason(spec, config)
    if reason is None:
        return None
    why = f"can never run on this engine: {rejection_message(spec, config)}"
    if reason is not RejectReason.EXCEEDS_KV_POOL:
        return CellProblem(index, "prompt_len", why)
    # The pool: the last answer token is never stored, so prompt + answer fit up to one token past the pool.
    fits = config.num_blocks * config.block_size + 1
    column = "output_len" if spec.prompt_len < fits else "prompt_len"
    return CellProblem(index, column, f"{why}; prompt + answer at most {fits:,} tokens fit the pool")


# ---- rows <-> specs ---------------------------------------------------------------------------------------------
def row_of(spec: RequestSpec) -> Row:
    """A spec as the table shows it: every cell text, empty where the spec has its default."""
    return {
        "id": spec.request_id, "client": "" if spec.client_id == "default" else spec.client_id,
        "arrival_step": "" if spec.arrival_step is None else str(spec.arrival_step),
        "arrival_ms": "" if spec.arrival_ms is None else time_text(spec.arrival_ms), "prompt_len": str(spec.prompt_len),
        "output_len": str(spec.output_len), "priority": str(spec.priority) if spec.priority else "",
        "abort_step": "" if spec.abort_step is None else str(spec.abort_step),
        "prefix_group": spec.prefix_group or "", "prefix_len": str(spec.prefix_len) if spec.prefix_len else "",
    }


def rows_of(specs: Sequence[RequestSpec]) -> list[Row]:
    return [row_of(s) for s in specs]


def dropped_fields(specs: Sequence[RequestSpec]) -> list[str]:
    """What the table cannot hold of ``specs`` (a file's max_tokens or stop strings), worded for a note."""
    out = []
    if n := sum(s.max_tokens is not None for s in specs):
        out.append(f"max_tokens of {count(n, 'request')}")
    if n := sum(s.stop_type.value != "token" for s in specs):
        out.append(f"the stop type of {count(n, 'request')}")
    return out


def new_row(rows: Sequence[Row]) -> Row:
    """A row to add: a fresh id, arriving with the last row, 100-token prompt and answer."""
    taken = {text(r.get("id")) for r in rows}
    n = len(rows)
    while f"r{n}" in taken:
        n += 1
    last = rows[-1] if rows else {}
    at_ms = "" if text(last.get("arrival_step")) else text(last.get("arrival_ms"))  # (a time, if the last gives one)
    return {"id": f"r{n}", "client": text(last.get("client")),
            "arrival_step": "" if at_ms else text(last.get("arrival_step")) or "0", "prompt_len": "100",
            "output_len": "100", "priority": "", "abort_step": "", "prefix_group": "", "prefix_len": "",
            "arrival_ms": at_ms}


def duplicate_row(rows: Sequence[Row], index: int) -> list[Row]:
    """``rows`` with a copy of row ``index`` after it, under a fresh id (``<id>-copy``, ``<id>-copy2``...)."""
    taken = {text(r.get("id")) for r in rows}
    base = f"{text(rows[index].get('id')) or 'r'}-copy"
    new_id, n = base, 1
    while new_id in taken:
        n += 1
        new_id = f"{base}{n}"
    copy = {**{k: text(rows[index].get(k)) for k in KEYS}, "id": new_id}
    return [*rows[: index + 1], copy, *rows[index + 1 :]]


def only_blank_rows_added(edits: dict[str, Any]) -> bool:
    """The editor's event of a reader starting to type into its empty last line: a row added with no cell typed
    yet (the typed value comes in the next event, to the same editor). Drawing the editor afresh on this one (a new
    key) threw the typed value away: the new row got ``new_row``'s defaults."""
    added = edits.get("added_rows") or []
    return (bool(added) and not edits.get("edited_rows") and not edits.get("deleted_rows")
            and not any(text(v) for row in added for k, v in row.items() if k in KEYS))


def apply_edits(rows: Sequence[Row], edits: dict[str, Any]) -> list[Row]:
    """``rows`` after an editor's edits (st.data_editor's state: ``edited_rows`` {position: {column: value}},
    ``deleted_rows`` [positions], ``added_rows`` [{column: value}]); an added row's empty cells get ``new_row``'s."""
    out = [{k: text(r.get(k)) for k in KEYS} for r in rows]
    for pos, changes in (edits.get("edited_rows") or {}).items():
        i = int(pos)
        if 0 <= i < len(out):
            out[i].update({k: text(v) for k, v in changes.items() if k in KEYS})
    gone = {int(i) for i in edits.get("deleted_rows") or []}
    out = [r for i, r in enumerate(out) if i not in gone]
    for added in edits.get("added_rows") or []:
        typed = {k: text(v) for k, v in added.items() if k in KEYS and text(v)}
        out.append({**new_row(out), **typed})
    return out


# ---- CSV and scenario JSON --------------------------------------------------------------------------------------
def to_csv(rows: Sequence[Row]) -> str:
    """The table as CSV: the scenario file's request keys as headers, cells as typed, except that a cell a
    spreadsheet would run as a formula ("=HYPERLINK(...)" as an id) starts with a quote (``sim.untrusted``; a number
    such as a priority of -5 stays a number). ``from_csv`` reads the quote back off."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=KEYS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: spreadsheet_cell(text(r.get(k)), numeric=_BY_KEY[k].lo is not None) for k in KEYS}
                     for r in rows)
    return out.getvalue()


MAX_IMPORT_BYTES = 2 * 2**20  # a CSV or JSON file the workbench reads at most (2,000 rows take ~100 KB)


def from_csv(data: str) -> list[Row]:
    """Rows from CSV text with the table's headers (``id``, ``arrival_step`` or ``arrival_ms``, ``prompt_len``,
    ``output_len`` required, the rest optional, in any order); ValueError names an unknown or missing header, or too
    many rows. The cells are kept as text: ``check_rows`` says which are bad."""
    if len(data) > MAX_IMPORT_BYTES:
        raise ValueError(f"the file is larger than {MAX_IMPORT_BYTES:,} bytes")
    reader = csv.DictReader(io.StringIO(data.lstrip("\ufeff")))
    try:
        return _csv_rows(reader)
    except csv.Error:  # (a cell past csv's field limit, 131,072 characters; a NUL byte; a quote left open)
        line = max(reader.reader.line_num, 1)  # (DictReader's own line_num lags a line)
        limit = csv.field_size_limit()
        # (told by the file's own lines, not by reading csv's message: a line that long holds the cell that was)
        why = (f"a cell longer than {limit:,} characters (an id, a client or a group holds at most {MAX_ID_CHARS}, a "
               f"number a few digits)" if any(len(row) > limit for row in data.splitlines())
               else "not CSV the workbench can read (a quote left open, a NUL character?)")
        raise ValueError(f"line {line:,}: {why}") from None


def _csv_rows(reader: csv.DictReader) -> list[Row]:
    headers = [h.strip() for h in reader.fieldnames or []]
    if not headers:
        raise ValueError("the file is empty: the first line must name the columns (id, arrival_step, prompt_len, "
                         "output_len, ...)")
    unknown = [h for h in headers if h not in KEYS]
    if unknown:
        raise ValueError(f"unknown column {unknown[0][:40]!r}; the columns are: {', '.join(KEYS)}")
    missing = [k for k in ("id", "arrival_step", "prompt_len", "output_len") if k not in headers
               and not (k == "arrival_step" and "arrival_ms" in headers)]
    if missing:
        raise ValueError(f"missing column {missing[0]!r}; id, arrival_step (or arrival_ms), prompt_len and "
                         f"output_len are required")
    rows = []
    for record in reader:
        if len(rows) >= MAX_ROWS:
            raise ValueError(f"more than {MAX_ROWS:,} rows: the workbench holds at most {MAX_ROWS:,} requests (run "
                             f"larger workloads with `python -m sim run`)")
        if None in record:
            raise ValueError(f"line {reader.line_num}: more cells than the {len(headers)} columns")
        rows.append({k.strip(): from_spreadsheet_cell(text(v)) for k, v in record.items() if k is not None})
    if not rows:
        raise ValueError("the file has a header line but no requests")
    return [{k: r.get(k, "") for k in KEYS} for r in rows]


def scenario_json(specs: Sequence[RequestSpec], config: EngineConfig, name: str) -> str:
    """The scenario file of ``specs`` on ``config`` (what ``python -m sim run`` reads)."""
    return scenario_io.dumps(Scenario(name, config, tuple(specs),
                                      "Built on the Scheduler Lab workbench (python -m sim run FILE)"))


def from_json(data: str) -> Scenario:
    """A scenario file (the format of ``python -m sim run``), within the app's limits and the table's size;
    ScenarioError names the field."""
    if len(data) > MAX_IMPORT_BYTES:
        raise ScenarioError(f"the file is larger than {MAX_IMPORT_BYTES:,} bytes")
    scenario = scenario_io.loads(data, cost_estimate.PAGE_LIMITS)
    if len(scenario.requests) > MAX_ROWS:
        raise ScenarioError(f"requests: {len(scenario.requests):,} requests, and the workbench holds at most "
                            f"{MAX_ROWS:,} (run larger workloads with `python -m sim run`)")
    return scenario


# ---- the link ---------------------------------------------------------------------------------------------------
URL_VERSION = "1"
MAX_URL_CHARS = 8_000  # a table parameter longer than this is refused (50 rows take ~1,000)


def encode_rows(rows: Sequence[Row]) -> str | None:
    """A table of at most URL_MAX_ROWS rows as one URL-safe string ("1." + base64 of the zlib'd cells); None for a
    larger one (its JSON file is the way to share it)."""
    if len(rows) > URL_MAX_ROWS:
        return None
    cells = []
    for r in rows:
        values = [text(r.get(k)) for k in KEYS]
        while values and not values[-1]:
            values.pop()
        cells.append(values)
    packed = zlib.compress(json.dumps(cells, separators=(",", ":")).encode(), 9)
    return f"{URL_VERSION}.{base64.urlsafe_b64encode(packed).decode().rstrip('=')}"


def decode_rows(param: str) -> list[Row]:
    """The rows ``encode_rows`` wrote; ValueError says why a tampered or cut link cannot be read. The cells are
    not checked here (``check_rows`` does)."""
    if len(param) > MAX_URL_CHARS:
        raise ValueError(f"longer than {MAX_URL_CHARS:,} characters")
    version, _, body = param.partition(".")
    if version != URL_VERSION or not body:
        raise ValueError(f"not a workbench table (it should start with {URL_VERSION}.)")
    try:
        packed = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        unzip = zlib.decompressobj()
        raw = unzip.decompress(packed, 256 * 1024)  # (bounded: a small link must not unpack to gigabytes)
        if unzip.unconsumed_tail or not unzip.eof:
            raise ValueError
        cells = json.loads(raw)
    except (ValueError, zlib.error, UnicodeDecodeError, RecursionError):  # (36 characters unpack to 990 nested [)
        raise ValueError("cut or changed: it does not unpack to a table") from None
    if not isinstance(cells, list) or not cells or len(cells) > URL_MAX_ROWS:
        raise ValueError(f"it must hold 1 to {URL_MAX_ROWS} rows")
    rows = []
    for values in cells:
        if not isinstance(values, list) or len(values) > len(KEYS) or not all(isinstance(v, str) for v in values):
            raise ValueError("a row is not a list of cells")
        rows.append({k: (values[i] if i < len(values) else "")[:200] for i, k in enumerate(KEYS)})
    return rows
