"""Words for the notes, read from what the page drew and the scenarios it ran: a figure's caption (what it shows
without the page around it: the lesson and preset, which runs, each axis, the legend, what is marked on it, the
settings) and a scenario's settings. Every number here is one the page drew or a setting of the runs' scenarios;
nothing is measured again. The text is Markdown with code spans and emphasis only (``document`` renders it as
HTML too).
"""

from __future__ import annotations

import dataclasses
import enum
import html
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from sim import scenario as scenario_io
from sim.scenario import Scenario
from ui.wording import count, join_and

from .capture import Capture, Chart

_TAG = re.compile(r"<[^>]+>")
_AXIS = re.compile(r"^([xy])axis(\d*)$")


def plain(text: str | None) -> str:
    """Chart text (plotly's HTML subset) as plain words: line breaks as spaces, tags dropped, entities read."""
    if not text:
        return ""
    text = re.sub(r"</b>\s*<br\s*/?>", "</b>: ", text, flags=re.IGNORECASE)  # (a bold name, its note below it)
    text = re.sub(r"<br\s*/?>", " ", text, flags=re.IGNORECASE)
    return " ".join(html.unescape(_TAG.sub("", text)).split())


_ICON = re.compile(r":material/[a-z0-9_]+:\s*")
_COLOURED = re.compile(r":(?:red|orange|green|blue|violet|gray|grey|rainbow|primary)\[([^\]]*)\]")
_LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


def page_markdown(text: str) -> str:
    """The page's own Markdown (a notice, a caption) for notes outside the app: Streamlit's icons and colours
    dropped, a link to a page of the app (the glossary) kept as its words, a web link kept."""
    text = _COLOURED.sub(r"\1", _ICON.sub("", text))
    return _LINK.sub(lambda m: m.group(0) if m.group(2).startswith(("http://", "https://")) else m.group(1), text)


def md_escape(text: str) -> str:
    """Text shown as typed in Markdown (a run label such as "SJF (true lengths)", a request id from a file)."""
    return re.sub(r"([\\`*_\[\]<>#|])", r"\\\1", text)


def title(chart: Chart) -> str:
    return plain(chart.figure["layout"].get("title", {}).get("text")) or chart.name


def axes(chart: Chart) -> list[tuple[str, list[str]]]:
    """("x" or "y", the distinct axis titles in axis order): a figure of several panels names each once."""
    found: dict[str, list[str]] = {"x": [], "y": []}
    layout = chart.figure["layout"]
    keys = sorted((k for k in layout if _AXIS.match(k)), key=lambda k: (k[0], int(_AXIS.match(k).group(2) or 1)))
    for key in keys:
        text = plain((layout[key].get("title") or {}).get("text"))
        if text and text not in found[key[0]]:
            found[key[0]].append(text)
    return [(letter, titles) for letter, titles in found.items() if titles]


def legend(chart: Chart) -> list[str]:
    """The legend's entries, in order (each once)."""
    if chart.figure["layout"].get("showlegend") is False:
        return []
    names: list[str] = []
    for trace in chart.figure["data"]:
        name = plain(trace.get("name"))
        if name and trace.get("showlegend", True) is not False and name not in names:
            names.append(name)
    return names


def marks(chart: Chart, run_labels: Sequence[str]) -> tuple[list[str], list[str]]:
    """(panel titles, other notes on the plot): the figure's annotations, a panel title being a run's label."""
    panels, notes = [], []
    for note in chart.figure["layout"].get("annotations", []):
        text = plain(note.get("text"))
        if not text:
            continue
        (panels if text in run_labels else notes).append(text)
    return panels, notes


def runs_shown(chart: Chart, run_labels: Sequence[str]) -> list[str]:
    """The runs a figure shows: those the step player's cursor follows on it, else those whose label names a
    legend entry, a panel, a bar or the title; every run when it names none (a figure of the runs as a whole)."""
    cursor = chart.figure["layout"].get("meta", {}).get("cursor", {}).get("runs")
    if cursor:
        return [label for label in run_labels if label in cursor]
    words = [title(chart), *legend(chart), *marks(chart, run_labels)[0]]
    for trace in chart.figure["data"]:
        for key in ("x", "y"):
            values = trace.get(key)
            if isinstance(values, list):
                words.extend(v for v in values if isinstance(v, str))
    shown = [label for label in run_labels if any(_names(word, label) for word in words)]
    return shown or list(run_labels)


def _names(word: str, label: str) -> bool:
    return word == label or any(word.startswith(label + tail) for tail in (" ", ":", ","))


def config_settings(scenario: Scenario) -> dict[str, Any]:
    """The scenario's engine settings as its JSON file writes them (the keys it sets), its sub-objects flattened
    (``model.name``, ``cost.step_base_ms``)."""
    config = scenario_io.scenario_to_dict(scenario)["config"]
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, Mapping) and dataclasses.is_dataclass(getattr(scenario.config, key, None)):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


def config_value(scenario: Scenario, key: str) -> Any:
    """One setting's value as the scenario file would write it, whether or not the file sets it (a default)."""
    written = config_settings(scenario)
    if key in written:
        return written[key]
    value: Any = scenario.config
    for part in key.split("."):
        value = getattr(value, part)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, tuple) and all(isinstance(v, tuple) and len(v) == 2 for v in value):
        return dict(value)  # (client_weights: the file writes {"A": 1.0, ...})
    return value


def setting(key: str, value: Any) -> str:
    """``key=value`` as the scenario file writes the value (true/false, an object or a list as JSON)."""
    if isinstance(value, (bool, Mapping, list, tuple)):
        value = json.dumps(value, separators=(", ", ": "))
    return f"`{key}={value}`"


def run_differences(runs: Sequence[tuple[str, Scenario]]) -> dict[str, list[str]]:
    """Each run's settings that differ between the runs compared (a policy, a budget): label -> ``key=value``."""
    settings = {label: config_settings(sc) for label, sc in runs}
    keys = sorted({k for s in settings.values() for k in s}, key=_setting_order)
    values = {label: {k: config_value(sc, k) for k in keys} for label, sc in runs}
    differ = [k for k in keys if len({repr(v[k]) for v in values.values()}) > 1]
    return {label: [setting(k, v[k]) for k in differ] for label, v in values.items()}


def common_settings(runs: Sequence[tuple[str, Scenario]]) -> list[str]:
    """The settings every run compared shares (those its file sets), then the model."""
    settings = [config_settings(sc) for _, sc in runs]
    first = settings[0]
    keys = sorted((k for k in first if all(repr(s.get(k)) == repr(first[k]) for s in settings)), key=_setting_order)
    out = [setting(k, first[k]) for k in keys if k != "model.name"]
    model = runs[0][1].config.model.name
    return [*out, f"model {model}"]


_FIRST = ("num_blocks", "block_size", "max_num_seqs", "max_num_batched_tokens", "chunked_prefill", "policy")


def _setting_order(key: str) -> tuple[int, str]:
    return (_FIRST.index(key), key) if key in _FIRST else (len(_FIRST), key)


def requests_phrase(scenario: Scenario) -> str:
    """How many requests the runs serve and where they come from (listed, or the seeded generator's settings)."""
    n = len(scenario.requests)
    spec = scenario.workload
    if spec is None:
        return f"{count(n, 'request')} listed in the scenario file"
    clients = ""
    if len(spec.clients) > 1:
        total = sum(c.share for c in spec.clients) or 1.0
        clients = ", " + join_and([f"client {md_escape(c.client_id)} {c.share / total:.0%}" for c in spec.clients])
    rate = f"{spec.rate_per_s:g} a second" if spec.on_clock else f"{spec.rate_per_step:g} a step"
    return (f"{count(n, 'request')} from the seeded generator (Poisson arrivals at {rate}, "
            f"median prompt {spec.prompt_median:,} and answer {spec.output_median:,} tokens{clients}; "
            f"seed {spec.seed})")


def runs_phrase(labels: Sequence[str], differences: Mapping[str, list[str]]) -> str:
    """"FCFS (`policy=fcfs`) and SJF (true lengths) (`policy=sjf`)"."""
    parts = []
    for label in labels:
        diff = differences.get(label, [])
        parts.append(f"{md_escape(label)} ({', '.join(diff)})" if diff else md_escape(label))
    return join_and(parts)


def caption(number: int, chart: Chart, cap: Capture) -> str:
    """The figure's caption: its title, the lesson and preset, the runs it shows (and how they differ), each axis,
    the legend, what is marked on it, what the page says about it, and the settings the runs share."""
    labels = [label for label, _ in cap.runs]
    shown = runs_shown(chart, labels)
    differences = run_differences(cap.runs)
    panels, notes = marks(chart, labels)
    parts = [f"**Figure {number}. {md_escape(title(chart))}.**",
             f"{cap.lesson.title} lesson, preset “{md_escape(cap.preset.title)}” (`{cap.preset.key}`).",
             f"{'Run' if len(shown) == 1 else 'Runs'}: {runs_phrase(shown, differences)}"
             + (f", one panel each ({join_and([md_escape(p) for p in panels])})" if len(panels) > 1 else "") + "."]
    for letter, titles in axes(chart):
        parts.append(f"{letter} {'axis' if len(titles) == 1 else 'axes'}: {'; '.join(md_escape(t) for t in titles)}.")
    entries = legend(chart)
    if entries:
        parts.append(f"Legend: {'; '.join(md_escape(e) for e in entries)}.")
    if notes:
        parts.append(f"Marked: {'; '.join(md_escape(n) for n in notes)}.")
    parts.extend(_sentence(page_markdown(c)) for c in chart.context)
    parts.append(f"Settings: {requests_phrase(cap.runs[0][1])}; {', '.join(common_settings(cap.runs))}.")
    return " ".join(parts)


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."
