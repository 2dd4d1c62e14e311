"""Scenario files: load, validate and dump the JSON format of docs/SCENARIO.md.

A scenario is ``{"name", "description", "config": {...}, "requests": [...]}``, or ``"workload": {...}`` (a seeded
generator, see ``workload.py``) instead of ``"requests"``. Every problem raises ``ScenarioError`` with one line that
names the field and says what is allowed; the CLI turns it into exit code 2.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import cost_estimate
from .admission import rejection_message, rejection_reason
from .config import (
    MODELS,
    CostModel,
    EngineConfig,
    FieldError,
    ModelSpec,
    ScenarioError,
    cdiv,
    json_type,
    model_name,
)
from .events import RejectReason
from .request import FIELD_DEFAULTS, RequestSpec, specs_from_columns
from .workload import WorkloadSpec, generate, workload_from_dict, workload_to_dict


@dataclass(frozen=True)
class Scenario:
    name: str
    config: EngineConfig
    requests: tuple[RequestSpec, ...]
    description: str = ""
    workload: WorkloadSpec | None = None  # set when ``requests`` were generated from it

    def with_config(self, **changes: Any) -> Scenario:
        return dataclasses.replace(self, config=self.config.replace(**changes))


_TOP_KEYS = {"name", "description", "config", "requests", "workload"}
_REQUEST_KEYS = {
    "id": "request_id", "arrival_step": "arrival_step", "prompt_len": "prompt_len", "output_len": "output_len",
    "client": "client_id", "priority": "priority", "abort_step": "abort_step", "prefix_group": "prefix_group",
    "prefix_len": "prefix_len", "max_tokens": "max_tokens", "stop": "stop_type", "slo": "slo",
    "arrival_ms": "arrival_ms",
}
_REQUIRED_REQUEST_KEYS = ("id", "arrival_step", "prompt_len", "output_len")  # (arrival_ms may replace arrival_step)
_REQUIRED_KEY_SET = frozenset(_REQUIRED_REQUEST_KEYS) - {"arrival_step"}
_CONFIG_FIELDS = {f.name for f in dataclasses.fields(EngineConfig)}


def _unknown(keys: Any, allowed: Any, where: str) -> None:
    extra = sorted(set(keys) - set(allowed))
    if extra:
        raise ScenarioError(f"{where}: unknown key {extra[0]!r}; allowed keys: {', '.join(sorted(allowed))}")


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ScenarioError(f"{where}: must be a JSON object, got {json_type(value)}")
    return value


def config_from_dict(data: Any) -> EngineConfig:
    data = dict(_object(data, "config"))
    _unknown(data, _CONFIG_FIELDS, "config")
    if "num_blocks" not in data:
        raise ScenarioError("config.num_blocks: required (usable GPU KV blocks)")
    model = data.pop("model", None)
    if isinstance(model, str):
        if model not in MODELS:
            raise ScenarioError(f"config.model: {model!r} is not one of: {', '.join(MODELS)}")
        data["model"] = MODELS[model]
    elif model is not None:
        data["model"] = _dataclass_from("config.model", ModelSpec, model)
    if "cost" in data:
        data["cost"] = _dataclass_from("config.cost", CostModel, data["cost"])
    try:
        return EngineConfig(**data)
    except FieldError as e:
        raise ScenarioError(str(e.at("config"))) from None
    except (ValueError, TypeError) as e:
        raise ScenarioError(f"config: {e}") from None


def _dataclass_from(where: str, cls: type, value: Any) -> Any:
    value = _object(value, where)
    _unknown(value, {f.name for f in dataclasses.fields(cls)}, where)
    try:
        return cls(**value)
    except FieldError as e:  # (the dataclass's errors sit within model or cost)
        raise ScenarioError(str(e.at("config"))) from None
    except (ValueError, TypeError) as e:
        raise ScenarioError(f"{where}: {e}") from None


def request_from_dict(data: Any, index: int) -> RequestSpec:
    where = f"requests[{index}]"
    data = _object(data, where)
    _unknown(data, _REQUEST_KEYS, where)
    for key in _REQUIRED_REQUEST_KEYS:
        if key not in data and not (key == "arrival_step" and "arrival_ms" in data):
            raise ScenarioError(f"{where}.{key}: required" + (" (or arrival_ms, a time on the run's clock)"
                                                              if key == "arrival_step" else ""))
    try:
        return RequestSpec(**{"arrival_step": None, **{_REQUEST_KEYS[k]: v for k, v in data.items()}})
    except (ValueError, TypeError) as e:
        raise ScenarioError(f"{where}: {e}") from None


def requests_from_list(items: list[Any]) -> list[RequestSpec]:
    """``request_from_dict`` of every item. When every item is an object with the required keys and no unknown one
    (the usual file), the values are checked a column at a time (``specs_from_columns``); otherwise, or when a value
    is not plainly valid, item by item, so the first problem is found and worded as ``request_from_dict`` words it."""
    if all(type(r) is dict and r.keys() >= _REQUIRED_KEY_SET for r in items):
        keys = set().union(*items)
        if keys <= _REQUEST_KEYS.keys():
            columns = {}
            for key, field in _REQUEST_KEYS.items():
                if key in keys:
                    default = FIELD_DEFAULTS.get(field)  # (None for a required key, which every item has)
                    columns[field] = [r.get(key, default) for r in items]
            specs = specs_from_columns(len(items), columns)
            if specs is not None:
                return specs
    return [request_from_dict(r, i) for i, r in enumerate(items)]


def request_to_dict(r: RequestSpec) -> dict[str, Any]:
    arrival = {"arrival_step": r.arrival_step} if r.arrival_ms is None else {"arrival_ms": r.arrival_ms}
    out: dict[str, Any] = {"id": r.request_id, **arrival, "prompt_len": r.prompt_len, "output_len": r.output_len}
    if r.client_id != "default":
        out["client"] = r.client_id
    optional = {
        "priority": (r.priority, 0), "abort_step": (r.abort_step, None), "prefix_group": (r.prefix_group, None),
        "prefix_len": (r.prefix_len, 0), "max_tokens": (r.max_tokens, None), "stop": (r.stop_type.value, "token"),
        "slo": (r.slo, True),
    }
    out.update({k: v for k, (v, default) in optional.items() if v != default})
    return out


def config_to_dict(c: EngineConfig) -> dict[str, Any]:
    """Non-default fields, plus the ones every scenario states (docs/SCENARIO.md#files-the-lab-writes)."""
    default = EngineConfig()
    always = ("num_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens", "policy")
    out: dict[str, Any] = {}
    for f in dataclasses.fields(EngineConfig):
        value = getattr(c, f.name)
        if f.name not in always and value == getattr(default, f.name):
            continue
        if f.name == "model":
            name = model_name(value)
            out["model"] = name if name else dataclasses.asdict(value)
        elif f.name == "cost":
            out["cost"] = dataclasses.asdict(value)
        elif f.name == "client_weights":
            out["client_weights"] = dict(value)
        else:
            out[f.name] = value.value if hasattr(value, "value") else value
    return out


def scenario_from_dict(data: Any, limits: cost_estimate.Limits | None = None) -> Scenario:
    """The scenario ``data`` states. With ``limits``, one whose cost passes them is refused before its workload is
    generated or its requests are built (and checked again on the requests drawn)."""
    data = _object(data, "scenario")
    _unknown(data, _TOP_KEYS, "scenario")
    name = data.get("name", "Untitled scenario")
    description = data.get("description", "")
    for key, value in (("name", name), ("description", description)):
        if not isinstance(value, str):
            raise ScenarioError(f"{key}: must be a string, got {json_type(value)}")
    if "config" not in data:
        raise ScenarioError("config: required (at least num_blocks)")
    config = config_from_dict(data["config"])
    has_requests, has_workload = "requests" in data, "workload" in data
    if has_requests == has_workload:
        raise ScenarioError("requests, workload: give exactly one of them")
    workload = None
    if has_workload:
        # (a workload's errors name their field from the file's top: workload.clients[A].share)
        try:
            workload = workload_from_dict(data["workload"])
        except FieldError as e:
            raise ScenarioError(str(e)) from None
        if limits is not None:  # (before drawing the requests: a workload of a few lines can ask for millions)
            cost_estimate.check(cost_estimate.of_workload(config, workload), limits)
        try:
            requests = generate(workload)
        except FieldError as e:
            raise ScenarioError(str(e)) from None
    else:
        items = data["requests"]
        if not isinstance(items, list) or not items:
            raise ScenarioError("requests: must be a non-empty list of request objects")
        if limits is not None and len(items) > limits.max_requests:
            raise ScenarioError(f"requests: the scenario has {len(items):,} requests, and {limits.who} allows at "
                                f"most {limits.max_requests:,}; {limits.advice}")
        requests = requests_from_list(items)
    check_requests(requests, config, generated=has_workload)
    if limits is not None:
        cost_estimate.check(cost_estimate.of_requests(config, requests), limits)
    return Scenario(name=name, config=config, requests=tuple(requests), description=description, workload=workload)


def check_requests(requests: list[RequestSpec] | tuple[RequestSpec, ...], config: EngineConfig,
                   generated: bool = False) -> None:
    """Duplicate ids and requests that can never run on this engine are errors in a scenario file.
    ``generated``: the requests come from the file's ``workload`` (the file has no ``requests`` to point at)."""
    seen: set[str] = set()
    fits = _surely_fit(requests, config)
    for i, r in enumerate(requests):
        if r.request_id in seen:
            raise ScenarioError(f"requests[{i}].id: duplicate request id {r.request_id!r}; ids must be unique")
        seen.add(r.request_id)
        late = r.arrival_step is not None and r.arrival_step >= config.max_steps  # (a time: the run's step guard)
        reason = None if late or fits[i] else rejection_reason(r, config)
        if not (late or reason):
            continue
        where = f"workload: its request {r.request_id!r}" if generated else f"requests[{i}] (id {r.request_id!r})"
        if late:
            field = f"{where} arrives at step" if generated else f"requests[{i}].arrival_step:"
            raise ScenarioError(f"{field} {r.arrival_step:,}, at or past max_steps ({config.max_steps:,}): the run "
                                f"would stop before it arrives; raise max_steps")
        advice = ("; enlarge num_blocks (or shorten the workload's lengths)"
                  if generated and reason is RejectReason.EXCEEDS_KV_POOL else "")
        raise ScenarioError(f"{where}: {rejection_message(r, config)}{advice}")


def _surely_fit(requests: list[RequestSpec] | tuple[RequestSpec, ...], config: EngineConfig) -> list[bool]:
    """Per request, True when no rejection rule can apply even at the longest it could get (its answer or
    max_tokens, whichever is more, plus a stop string's extra token): a bound on a few columns, so that only the
    rest go through ``rejection_reason``'s exact rules (~5 us a request, most of a 2,000-request file's load)."""
    prompt = np.array([r.prompt_len for r in requests], dtype=np.int64)
    longest = np.array([max(r.output_len + 1, r.max_tokens or 0) for r in requests], dtype=np.int64)
    ok = (cdiv(prompt + longest - 1, config.block_size) <= config.num_blocks) & (
        prompt <= config.effective_max_model_len)
    if not config.chunked_prefill:
        ok &= prompt <= config.max_num_batched_tokens
    return ok.tolist()


def scenario_to_dict(s: Scenario) -> dict[str, Any]:
    out: dict[str, Any] = {"name": s.name}
    if s.description:
        out["description"] = s.description
    out["config"] = config_to_dict(s.config)
    if s.workload is not None:
        out["workload"] = workload_to_dict(s.workload)
    else:
        out["requests"] = [request_to_dict(r) for r in s.requests]
    return out


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json.loads' object hook: a key written twice in one object is an error (JSON keeps the last silently)."""
    out = dict(pairs)
    if len(out) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ScenarioError(f"key {key!r} appears twice in one JSON object; write each setting once")
            seen.add(key)
    return out


def _check_text(value: Any, where: str) -> None:
    """Every string is text: JSON's \\u escapes can spell half a surrogate pair (\\ud800), which no page, file or
    terminal can show."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ScenarioError(f"{where}: holds an unpaired surrogate escape (\\ud800-\\udfff), not text") from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_text(key, f"{where}: a key")
            _check_text(item, f"{where}.{key}" if where != "scenario" else key)
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_text(item, f"{where}[{i}]")


def loads(text: str, limits: cost_estimate.Limits | None = None) -> Scenario:
    """The scenario in JSON ``text``; with ``limits``, refused when it would cost more (``scenario_from_dict``)."""
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except ScenarioError:  # (from _unique_keys: already says what is wrong)
        raise
    except json.JSONDecodeError as e:
        raise ScenarioError(f"not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except ValueError as e:  # e.g. an integer literal of more than 4,300 digits
        raise ScenarioError(f"not valid JSON here: {e}".split(";")[0]) from None
    except RecursionError:
        raise ScenarioError("not valid JSON here: nested too deeply") from None
    # Half a surrogate pair comes from a \u escape or is a character of ``text`` itself (made in Python: a file read
    # as UTF-8 cannot hold one); with neither, skip the walk over every string (~3 ms for 2,000 requests).
    if "\\u" in text or not text.isascii():
        _check_text(data, "scenario")
    return scenario_from_dict(data, limits)


MAX_FILE_BYTES = 256 * 2**20  # a scenario file's size at most (the 20,000-request benchmark's is ~2 MB)


def load(path: str | os.PathLike[str], limits: cost_estimate.Limits | None = None) -> Scenario:
    """The scenario in file ``path``; a ScenarioError says what is wrong (the caller names the file). With
    ``limits``, a scenario that would cost more is refused before it is generated or run."""
    try:
        with open(path, encoding="utf-8-sig") as f:  # (a byte-order mark, as some editors write, is fine)
            text = f.read(MAX_FILE_BYTES + 1)  # (bounded: /dev/zero or a pipe that never ends is refused, not read)
    except OSError as e:
        raise ScenarioError(f"cannot read the file: {e.strerror}") from None
    except UnicodeDecodeError:
        raise ScenarioError("not a UTF-8 text file") from None
    if len(text) > MAX_FILE_BYTES:
        raise ScenarioError(f"larger than {MAX_FILE_BYTES:,} bytes, the most a scenario file may hold (use a "
                            f"workload generator instead of listing the requests)")
    return loads(text, limits)


def dumps(s: Scenario) -> str:
    return json.dumps(scenario_to_dict(s), indent=1)
