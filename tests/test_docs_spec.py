"""The repository owns its spec (issue 32): docs/SCENARIO.md's tables say what the code accepts, and the code cites
docs/ENGINE.md and docs/SCENARIO.md, never the design document outside the repository.

- Each table of docs/SCENARIO.md lists exactly the keys its object accepts, read from the code (the dataclasses'
  fields, sim/scenario.py's key sets).
- A default a table states is the one the code uses when the key is left out, and the dataclass's own; a key the
  table calls required cannot be left out.
- A numeric range a table states holds at both ends (accepted there, refused just past it); a list of choices is the
  code's list.
- The examples in SCENARIO.md load (the bad one fails with the message the doc prints).
- No code file mentions the outside design document, and every anchor of a doc under docs/ that the code cites (and
  every link between the docs) names a heading that exists, by GitHub's slug rule.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from sim import scenario
from sim.__main__ import main as cli_main
from sim.config import MODELS, CostModel, EngineConfig, ModelSpec, Policy, PreemptionMode, StopCheck
from sim.request import RequestSpec, StopType
from sim.workload import ABANDON_POINTS, ClientSpec, WorkloadSpec, workload_from_dict
from tests.conftest import REPO_ROOT

DOCS = REPO_ROOT / "docs"
SCENARIO_DOC = DOCS / "SCENARIO.md"
INVALID = (ValueError, TypeError)  # (ScenarioError is a ValueError; the workload parser raises ValueError)


# ---- Markdown ----------------------------------------------------------------------------------------------------
def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped (hyphens and underscores kept), spaces to '-'."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def sections(text: str) -> dict[str, str]:
    """Each heading's anchor -> the text under it, up to the next heading (fenced code never holds a heading)."""
    out: dict[str, list[str]] = {}
    current: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        heading = None if fenced else re.match(r"#{1,6} (.+)", line)
        if heading:
            anchor = slug(heading.group(1))
            assert anchor not in out, f"two headings with the anchor #{anchor} (GitHub would number the second)"
            current = out[anchor] = []
        else:
            current.append(line)
    return {anchor: "\n".join(lines) for anchor, lines in out.items()}


def anchors(path: Path) -> set[str]:
    return set(sections(path.read_text()))


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def table_rows(section: str) -> list[dict[str, str]]:
    """The rows of the one table in ``section``, each a dict by the header's column names."""
    lines = [line for line in section.splitlines() if line.startswith("|")]
    assert len(lines) > 2, "no table here"
    header = _cells(lines[0])
    assert {"key", "type", "allowed", "default"} <= set(header), f"a table needs these columns, has {header}"
    rows = [dict(zip(header, _cells(line), strict=True)) for line in lines[2:]]
    for row in rows:
        assert re.fullmatch(r"`\w+`", row["key"]), f"a key cell is one `name`: {row['key']!r}"
        row["key"] = row["key"].strip("`")
    return rows


def code_blocks(section: str, lang: str = "") -> list[str]:
    """The fenced blocks in ``section`` whose opening fence names ``lang`` ('' for a bare fence)."""
    blocks: list[str] = []
    lines: list[str] | None = None  # the open block's lines (None: outside any block)
    block_lang = ""
    for line in section.splitlines():
        if line.startswith("```"):
            if lines is None:
                lines, block_lang = [], line[3:].strip()
            else:
                if block_lang == lang:
                    blocks.append("\n".join(lines))
                lines = None
        elif lines is not None:
            lines.append(line)
    return blocks


# ---- the code's side of each table --------------------------------------------------------------------------------
BASE_REQUEST = {"id": "a", "arrival_step": 0, "prompt_len": 10, "output_len": 10}
BASE_SCENARIO = {"config": {"num_blocks": 100}, "requests": [BASE_REQUEST]}
BASE_GENERATED = {"config": {"num_blocks": 10_000}, "workload": {"num_requests": 2}}


def _with(base: dict, given: dict, dropped: frozenset[str]) -> dict:
    return {**{k: v for k, v in base.items() if k not in dropped}, **given}


def _defaults(cls: type) -> dict[str, Any]:
    """The dataclass's default for each field that has one."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            out[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            out[f.name] = f.default_factory()
    return out


def _top(given: dict, dropped: frozenset[str]) -> scenario.Scenario:
    base = BASE_GENERATED if "workload" in given or "workload" in dropped else BASE_SCENARIO
    return scenario.scenario_from_dict(_with(base, given, dropped))


def _config(given: dict, dropped: frozenset[str]) -> EngineConfig:
    return scenario.config_from_dict(_with({"num_blocks": 100}, given, dropped))


def _client(given: dict, dropped: frozenset[str]) -> ClientSpec:
    # (a second client keeps the total rate above 0 when this one's share is 0; a rate per second is a workload's
    # on the clock)
    clients = [_with({"client_id": "x"}, given, dropped), {"client_id": "other"}]
    on_clock = {"rate_per_s": 1.0} if given.get("rate_per_s") is not None else {}
    return workload_from_dict({"clients": clients, **on_clock}).clients[0]


def _request(given: dict, dropped: frozenset[str]) -> RequestSpec:
    # (a time replaces the base request's arrival step: a request gives one of the two)
    timed = frozenset({"arrival_step"}) if given.get("arrival_ms") is not None else frozenset()
    return scenario.request_from_dict(_with(BASE_REQUEST, given, dropped | timed), 0)


@dataclass(frozen=True)
class Table:
    """One table of SCENARIO.md and the code behind it."""
    keys: frozenset[str]  # the keys the code accepts
    build: Callable[[dict, frozenset[str]], Any]  # what the code makes of the keys given (its base less those dropped)
    value: Callable[[Any, str], Any]  # a key's value in what build made
    defaults: dict[str, Any]  # the dataclass's defaults by key (the top-level object has only the Scenario's)
    base: frozenset[str]  # the keys of build's base: the ones the table must call required


def _field_keys(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


_REQUEST_FIELD = scenario._REQUEST_KEYS  # file key -> RequestSpec field
_REQUEST_DEFAULTS = _defaults(RequestSpec)
TABLES: dict[str, Table] = {
    "the-scenario-object": Table(
        frozenset(scenario._TOP_KEYS), _top, getattr,
        {k: v for k, v in _defaults(scenario.Scenario).items() if k in scenario._TOP_KEYS},
        frozenset({"config", "requests"})),
    "config": Table(_field_keys(EngineConfig), _config, getattr, _defaults(EngineConfig), frozenset({"num_blocks"})),
    "configmodel": Table(_field_keys(ModelSpec), lambda g, d: _config({"model": _with({}, g, d)}, frozenset()).model,
                         getattr, _defaults(ModelSpec), frozenset()),
    "configcost": Table(_field_keys(CostModel), lambda g, d: _config({"cost": _with({}, g, d)}, frozenset()).cost,
                        getattr, _defaults(CostModel), frozenset()),
    "requests": Table(
        frozenset(_REQUEST_FIELD),
        _request,
        lambda spec, key: getattr(spec, _REQUEST_FIELD[key]),
        {key: _REQUEST_DEFAULTS[field] for key, field in _REQUEST_FIELD.items() if field in _REQUEST_DEFAULTS},
        frozenset(BASE_REQUEST)),
    "workload": Table(_field_keys(WorkloadSpec), lambda g, d: workload_from_dict(_with({}, g, d)), getattr,
                      _defaults(WorkloadSpec), frozenset()),
    "workloadclients": Table(_field_keys(ClientSpec), _client, getattr, _defaults(ClientSpec), frozenset()),
}

# The choices each "one of" row lists, as the code defines them.
CHOICES: dict[tuple[str, str], set[str]] = {
    ("config", "policy"): {p.value for p in Policy},
    ("config", "preemption_mode"): {m.value for m in PreemptionMode},
    ("config", "stop_check"): {c.value for c in StopCheck},
    ("config", "model"): set(MODELS),
    ("requests", "stop"): {t.value for t in StopType},
    ("workload", "generator"): {"poisson"},
    ("workload", "abandon_point"): set(ABANDON_POINTS),
}

# Numeric rows whose range depends on another value: stated in words, not checked at fixed ends here.
DEPENDENT_RANGES = {("config", "max_model_len"), ("requests", "abort_step"), ("requests", "prefix_len"),
                    ("workloadclients", "stop_step")}


def _rows(anchor: str) -> list[dict[str, str]]:
    doc = sections(SCENARIO_DOC.read_text())
    assert anchor in doc, f"docs/SCENARIO.md has no heading with the anchor #{anchor}"
    return table_rows(doc[anchor])


def _documented_default(row: dict[str, str]) -> tuple[bool, Any]:
    """(required, the default as a JSON value) from a row's default cell."""
    cell = row["default"]
    if cell.startswith("required"):
        return True, None
    m = re.fullmatch(r"`(.+)`", cell)
    assert m, f"{row['key']}: a default is `a JSON value` or 'required...', got {cell!r}"
    return False, json.loads(m.group(1))


def _accepts(table: Table, key: str, value: Any) -> bool:
    try:
        table.build({key: value}, frozenset())
    except INVALID:
        return False
    return True


# ---- the tables ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("anchor", list(TABLES))
def test_each_table_lists_exactly_the_keys_the_code_accepts(anchor):
    documented = [row["key"] for row in _rows(anchor)]
    assert len(documented) == len(set(documented)), f"#{anchor}: a key has two rows"
    keys = TABLES[anchor].keys
    missing = sorted(keys - set(documented))
    bogus = sorted(set(documented) - keys)
    assert not missing, f"docs/SCENARIO.md#{anchor} has no row for keys the code accepts: {missing}"
    assert not bogus, f"docs/SCENARIO.md#{anchor} documents keys the code does not accept: {bogus}"


def test_every_request_field_has_a_file_key():
    assert set(_REQUEST_FIELD.values()) == {f.name for f in dataclasses.fields(RequestSpec)}


@pytest.mark.parametrize("anchor", list(TABLES))
def test_documented_defaults_are_the_codes(anchor):
    table = TABLES[anchor]
    required = set()
    for row in _rows(anchor):
        key = row["key"]
        is_required, default = _documented_default(row)
        if is_required:
            required.add(key)
            with pytest.raises(INVALID):
                table.build({}, frozenset({key}))
            continue
        given = table.value(table.build({key: default}, frozenset()), key)
        left_out = table.value(table.build({}, frozenset({key})), key)
        assert given == left_out, f"#{anchor} {key}: the documented default {default!r} is not what the code uses"
        if key in table.defaults:
            assert given == table.defaults[key], f"#{anchor} {key}: {default!r} differs from the dataclass's default"
    assert table.base <= required, f"#{anchor}: keys the code requires that the table does not call required"


_NUMBER = r"-?\d[\d,]*(?:\.\d+)?"


def _number(text: str, integer: bool) -> int | float:
    text = text.replace(",", "")
    return int(text) if integer else float(text)


def _range(row: dict[str, str]) -> tuple[float, float | None, bool] | None:
    """(low, high or None, high excluded) from an allowed cell that starts 'A to B', 'A to B (B excluded)' or
    'at least A'; None for any other wording."""
    integer = row["type"].startswith("integer")
    m = re.match(rf"({_NUMBER}) to ({_NUMBER})( \(\S+ excluded\))?", row["allowed"])
    if m:
        return _number(m.group(1), integer), _number(m.group(2), integer), bool(m.group(3))
    m = re.match(rf"at least ({_NUMBER})", row["allowed"])
    if m:
        return _number(m.group(1), integer), None, False
    return None


def _step(bound: float, integer: bool) -> float:
    """Just past a bound: a whole number, or a billionth of it."""
    return 1 if integer else 1e-9 * max(1.0, abs(bound))


@pytest.mark.parametrize("anchor", list(TABLES))
def test_documented_ranges_hold_at_their_ends(anchor):
    table = TABLES[anchor]
    for row in _rows(anchor):
        key, kind = row["key"], row["type"]
        if not kind.startswith(("integer", "number")):
            continue
        bounds = _range(row)
        if bounds is None:
            assert (anchor, key) in DEPENDENT_RANGES, f"#{anchor} {key}: no range the test can read: {row['allowed']!r}"
            continue
        lo, hi, hi_excluded = bounds
        integer = kind.startswith("integer")
        assert _accepts(table, key, lo), f"#{anchor} {key}: {lo} refused"
        assert not _accepts(table, key, lo - _step(lo, integer)), f"#{anchor} {key}: below {lo} accepted"
        if hi is not None:
            top, past = (hi - _step(hi, integer), hi) if hi_excluded else (hi, hi + _step(hi, integer))
            assert _accepts(table, key, top), f"#{anchor} {key}: {top} refused"
            assert not _accepts(table, key, past), f"#{anchor} {key}: {past} accepted"
        if "`null`" in row["allowed"]:
            assert _accepts(table, key, None), f"#{anchor} {key}: null refused"


@pytest.mark.parametrize("anchor", list(TABLES))
def test_documented_choices_are_the_codes(anchor):
    table = TABLES[anchor]
    for row in _rows(anchor):
        key = row["key"]
        if row["type"] == "true/false":
            assert _accepts(table, key, True) and _accepts(table, key, False)
            assert not _accepts(table, key, 1), f"#{anchor} {key}: a number taken for true/false"
        if not row["allowed"].startswith("one of "):
            assert (anchor, key) not in CHOICES, f"#{anchor} {key}: its choices are not listed ('one of ...')"
            continue
        listed = [json.loads(v) for v in re.findall(r'`("[^"`]*")`', row["allowed"])]
        assert (anchor, key) in CHOICES, f"#{anchor} {key}: lists choices the test does not know the code's for"
        assert set(listed) == CHOICES[anchor, key], f"#{anchor} {key}: the choices differ from the code's"
        for value in listed:
            assert _accepts(table, key, value), f"#{anchor} {key}: {value!r} refused"
        assert not _accepts(table, key, "no-such-choice")


# ---- the examples ------------------------------------------------------------------------------------------------
def test_the_examples_load_and_the_minimal_one_runs_as_the_doc_says(tmp_path, capsys):
    doc = sections(SCENARIO_DOC.read_text())
    examples = code_blocks(doc["a-minimal-example"], "json")
    assert len(examples) == 2
    for text in examples:
        scenario.loads(text)
    path = tmp_path / "minimal.json"
    path.write_text(examples[0])
    assert cli_main(["run", str(path), "--out", str(tmp_path / "result.json")]) == 0
    printed = capsys.readouterr().out.strip().replace(str(tmp_path / "result.json"), "result.json")
    assert f"`{printed}`" in " ".join(doc["a-minimal-example"].split()), "the doc's CLI line differs from the CLI's"


def test_the_bad_example_fails_with_the_message_the_doc_prints():
    doc = sections(SCENARIO_DOC.read_text())["errors"]
    bad = code_blocks(doc, "json")[0]
    with pytest.raises(scenario.ScenarioError) as e:
        scenario.loads(bad)
    assert f"error: bad.json: {e.value}" in code_blocks(doc)[0].splitlines()


# ---- citations ---------------------------------------------------------------------------------------------------
CODE_DIRS = ("sim", "ui", "tests", "pages", "scripts", "benchmarks")


def _code_files() -> list[Path]:
    files = [p for d in CODE_DIRS for p in sorted((REPO_ROOT / d).rglob("*.py"))]
    return [*files, REPO_ROOT / "app.py"]


def test_no_code_mentions_the_design_document_outside_the_repository():
    needle = "DESIGN" + ".md"  # (spelled in two parts so that this file does not mention it)
    files = [*_code_files(), REPO_ROOT / "README.md"]
    naming = [p.relative_to(REPO_ROOT).as_posix() for p in files if needle in p.read_text()]
    assert not naming, f"cite docs/ENGINE.md or docs/SCENARIO.md instead of {needle} in: {naming}"


def test_every_cited_doc_anchor_exists():
    cited: list[tuple[str, str, str]] = []  # (where, doc file, anchor)
    for path in [*_code_files(), REPO_ROOT / "README.md"]:
        for doc, anchor in re.findall(r"docs/(\w+\.md)#([\w-]+)", path.read_text()):
            cited.append((path.relative_to(REPO_ROOT).as_posix(), doc, anchor))
    assert len(cited) >= 10, "the code should cite the docs' sections (the regex found almost none)"
    for path in sorted(DOCS.glob("*.md")):  # links between the docs: (#anchor) and (OTHER.md#anchor)
        for doc, anchor in re.findall(r"\]\((\w+\.md)?#([\w-]+)\)", path.read_text()):
            cited.append((f"docs/{path.name}", doc or path.name, anchor))
    missing = [f"{where}: docs/{doc}#{anchor}" for where, doc, anchor in cited
               if not (DOCS / doc).exists() or anchor not in anchors(DOCS / doc)]
    assert not missing, f"cited anchors with no such heading: {missing}"


def test_the_slug_rule():
    assert slug("config.model") == "configmodel"
    assert slug("Waiting-queue orders") == "waiting-queue-orders"
    assert slug("`max_num_seqs` and the budget") == "max_num_seqs-and-the-budget"
