"""Widgets whose values live in the URL, so a copied link reproduces the view; and the URL that follows the reader
from page to page.

A page declares its knobs (``Knob``), then ``KnobPanel(page, knobs).render(container)`` returns their values.
On the first run of a session the values come from the URL (``st.query_params``) when they are valid; an invalid
or tampered value falls back to the default with a visible warning. After every run the URL holds exactly the
values that differ from the defaults (the preset's), so links stay short.

Leaving a page and coming back: Streamlit's page links drop the query string, and a page's widgets lose their
state once another page has run. So every write to the URL goes through ``set_param``, which also remembers the
page's query string in the session, and ``arrive(page)`` (first thing in every run, from ``ui.page.setup``) puts
it back when the reader returns to a page: the widgets then start from the URL, as from a copied link. The
session-wide settings (``SESSION_PARAMS``: presentation mode, the export format, the chart theme) come along from
the page just left. Any view setting that a page keeps in the URL this way (a knob, the preset, the chart picked,
the player's step) survives navigation without code of its own.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import streamlit as st

from sim.untrusted import decimal_number, whole_number

from .wording import as_code

PRESET_PARAM = "preset"
SESSION_PARAMS = ("present", "export", "theme")  # the Display panel's: one value for the whole session, not per page
_URLS = "__urls"  # session state: {page: {param: [values]}}, each page's query string as the reader left it
_PAGE = "__page"  # session state: the page of the latest run
_RETURNED = "__returned"  # session state: this run is the first of a page after another page's (a page link)

Params = dict[str, list[str]]


def _current_params() -> Params:
    return {k: st.query_params.get_all(k) for k in st.query_params}


def arrival_params(current: Params, saved: Params, left: Params) -> Params:
    """The query string for a page the reader has just navigated to: ``current`` (what the link gave), or, when it
    gives no setting of the page (a page link drops them), ``saved`` (the page's own, as the reader left it); the
    session-wide settings in either case from ``left`` (the page just left) unless the link sets them."""
    page_params = {k: v for k, v in current.items() if k not in SESSION_PARAMS}
    out = page_params or {k: v for k, v in saved.items() if k not in SESSION_PARAMS}
    for k in SESSION_PARAMS:
        if k in current:
            out[k] = current[k]
        elif k in left:
            out[k] = left[k]
    return out


def arrive(page: str) -> None:
    """At the top of every run of ``page``: on a return from another page, restore the page's URL (see the module
    docstring); then remember it."""
    state = st.session_state
    urls = state.setdefault(_URLS, {})
    last, state[_PAGE] = state.get(_PAGE), page
    state[_RETURNED] = last is not None and last != page
    if state[_RETURNED]:
        current = _current_params()
        wanted = arrival_params(current, urls.get(page, {}), urls.get(last, {}))
        if wanted != current:
            st.query_params.from_dict(wanted)
    urls[page] = _current_params()


def arrived_from_another_page() -> bool:
    """This run is a page's first after another page ran in the session: its widgets start empty (Streamlit drops
    the state of widgets a run does not draw), which is not the reader emptying them (an upload box, say)."""
    return bool(st.session_state.get(_RETURNED))


def set_param(name: str, value: str | None) -> None:
    """Put ``name=value`` in the URL (None: take it out) and remember the page's URL for the reader's return. Every
    view setting a page keeps in the URL is written here (a fragment's too: it does not run ``arrive``)."""
    if value is None:
        st.query_params.pop(name, None)
    elif st.query_params.get_all(name) != [value]:
        st.query_params[name] = value
    page = st.session_state.get(_PAGE)
    if page is not None:
        st.session_state.setdefault(_URLS, {})[page] = _current_params()



@dataclass(frozen=True)
class Knob:
    """One setting: ``key`` is the URL parameter name; units go in the label."""

    key: str
    label: str
    kind: str  # "int" | "float" | "bool" | "choice" | "multi"
    default: Any
    min: float | None = None
    max: float | None = None
    step: float | None = None
    options: tuple[Any, ...] = ()
    labels: dict[Any, str] = field(default_factory=dict)  # display names for options
    help: str = ""
    widget: str = "slider"  # slider | number | select | select_slider | toggle | multiselect | segmented
    fmt: str | None = None

    def __post_init__(self) -> None:
        # A float knob's numbers are floats, even when its default comes from a file that wrote "3" for 3.0: a
        # slider refuses a float minimum beside an int maximum (or value).
        if self.kind == "float":
            for name in ("default", "min", "max", "step"):
                value = getattr(self, name)
                if isinstance(value, int) and not isinstance(value, bool):
                    object.__setattr__(self, name, float(value))

    def parse(self, raw: str | list[str]) -> Any:
        """The value a URL parameter stands for; ValueError says what is allowed. A key given several times is the
        union of its lists for a "multi" knob (?policies=FCFS&policies=VTC), else its last value."""
        if self.kind == "multi" and not isinstance(raw, str):
            raw = ",".join(r for r in raw if r)
        text = raw if isinstance(raw, str) else (raw[-1] if raw else "")
        if self.kind == "int":  # (ASCII digits, and not 5,000 of them: sim/untrusted.py)
            try:
                value = whole_number(text, -(10**18), 10**18)
            except ValueError:
                raise ValueError(f"must be a whole number {self._range()}") from None
            return self._in_range(value)
        if self.kind == "float":  # (no nan, inf or other scripts' digits)
            try:
                value = decimal_number(text, -sys.float_info.max, sys.float_info.max)
            except ValueError:
                raise ValueError(f"must be a number {self._range()}") from None
            return self._in_range(value)
        if self.kind == "bool":
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError("must be true or false")
        if self.kind == "choice":
            if text not in [str(o) for o in self.options]:
                raise ValueError(f"must be one of: {', '.join(str(o) for o in self.options)}")
            return next(o for o in self.options if str(o) == text)
        if self.kind == "multi":  # "" is an empty selection (what to_url writes for one)
            names = {str(o): o for o in self.options}
            pieces, chosen, i = (text.split(",") if text else []), [], 0
            while i < len(pieces):  # an option's own name may hold a comma: take the longest name that fits
                j = next((j for j in range(len(pieces), i, -1) if ",".join(pieces[i:j]) in names), None)
                if j is None:
                    raise ValueError(f"must be a comma-separated list of: {', '.join(names)}")
                chosen.append(names[",".join(pieces[i:j])])
                i = j
            return [o for o in self.options if o in chosen]
        raise ValueError(f"unknown knob kind {self.kind!r}")

    @property
    def bounds(self) -> tuple[float | None, float | None]:
        """(min, max) of the widget: the knob's range, widened to take in a default outside it (an uploaded
        scenario's value, say, which the widget must be able to show)."""
        lo, hi = self.min, self.max
        if self.kind in ("int", "float"):
            lo = None if lo is None else min(lo, self.default)
            hi = None if hi is None else max(hi, self.default)
        return lo, hi

    def _range(self) -> str:
        lo, hi = self.bounds
        # (10 digits: a bound like 2**-10 GiB shown as 0.000976562 would itself be refused)
        return f"between {lo:.10g} and {hi:.10g}" if lo is not None and hi is not None else ""

    def _in_range(self, value: float) -> float:
        lo, hi = self.bounds
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise ValueError(f"must be {self._range()}")
        return value

    def to_url(self, value: Any) -> str:
        if self.kind == "multi":
            return ",".join(str(v) for v in value)
        if self.kind == "bool":
            return "1" if value else "0"
        return str(value)

    @property
    def choices(self) -> tuple[Any, ...]:
        """The options, with a default that is not among them added (an uploaded scenario's value)."""
        if self.kind == "choice" and self.default not in self.options:
            return (*self.options, self.default)
        return self.options

    def display(self, value: Any) -> str:
        """An option's (or a multi knob's list of options') name for people."""
        if isinstance(value, list | tuple):
            return ", ".join(self.display(v) for v in value) or "none"
        if self.kind == "bool":
            return self.labels.get(value, "on" if value else "off")
        if self.kind in ("int", "float") and not self.labels:
            return f"{value:,}" if self.kind == "int" else f"{value:,.4g}"
        return self.labels.get(value, str(value))


class KnobPanel:
    """A page's knobs: state keys are namespaced by page (``page.key``) so pages never share widget state."""

    def __init__(self, page: str, knobs: list[Knob], scope: str = ""):
        self.page = page
        self.knobs = knobs
        self.scope = scope  # changes when the preset changes, so defaults reset

    def state_key(self, knob: Knob) -> str:
        return f"{self.page}.{knob.key}"

    def _init_state(self) -> list[str]:
        """Seed each widget's state from the URL (first run) or the default; return warnings for bad URL values."""
        warnings = []
        scope_key = f"{self.page}.__scope"
        rescoped = st.session_state.get(scope_key) not in (None, self.scope)
        for knob in self.knobs:
            key = self.state_key(knob)
            if rescoped:  # a new preset: its defaults replace whatever was set for the old one
                st.session_state[key] = knob.default
                continue
            if key in st.session_state:
                # (set again, as the page's own: a widget drawn on every page, the Display panel's, would
                # otherwise start from its default on the next page, where Streamlit sees another widget)
                st.session_state[key] = st.session_state[key]
                continue
            value = knob.default
            if knob.key in st.query_params:
                raw = st.query_params.get_all(knob.key)
                if knob.kind != "multi" and len(set(raw)) > 1:
                    warnings.append(f"The link gives {as_code(knob.key)} {len(raw)} times; using the last, "
                                    f"{as_code(raw[-1])}.")
                try:
                    value = knob.parse(raw)
                except ValueError as e:
                    # (the link's text, not Markdown; a list given twice is one setting: all of it)
                    given = ",".join(r for r in raw if r) if knob.kind == "multi" else (raw[-1] if raw else "")
                    shown = as_code(f"{knob.key}={given}")
                    warnings.append(f"The link's setting {shown} was ignored: {knob.label} {e}. "
                                    f"Using the default, {knob.display(knob.default)}.")
            st.session_state[key] = value
        st.session_state[scope_key] = self.scope
        return warnings

    def changed(self) -> list[tuple[Knob, Any]]:
        """The knobs whose value (in this session) differs from their default, with that value."""
        state = st.session_state
        return [(k, state[self.state_key(k)]) for k in self.knobs
                if self.state_key(k) in state and state[self.state_key(k)] != k.default]

    def reset(self) -> None:
        """Every knob back to its default (a button's callback: it runs before the widgets are drawn again)."""
        for knob in self.knobs:
            st.session_state[self.state_key(knob)] = knob.default
        st.session_state.pop(f"{self.page}.__url_warnings", None)

    def render(self, container: Any = None) -> dict[str, Any]:
        """Draw the widgets (in ``container``, default the sidebar) and return {knob key: value}."""
        for w in self._url_warnings(self._init_state()):
            st.warning(w, icon=":material/warning:")
        box = container if container is not None else st.sidebar
        values = {knob.key: self._widget(box, knob) for knob in self.knobs}
        self._sync_url(values)
        return values

    def _url_warnings(self, new: list[str]) -> list[str]:
        """The warnings about the link's bad values: shown on every rerun (a sweep that completes reruns the page)
        until the reader changes one of this panel's settings."""
        key = f"{self.page}.__url_warnings"
        state = tuple(st.session_state.get(self.state_key(k)) for k in self.knobs)
        if new:
            st.session_state[key] = (new, state)
            return new
        warnings, seen_with = st.session_state.get(key, ([], None))
        if warnings and seen_with != state:
            del st.session_state[key]
            return []
        return warnings

    def _widget(self, box: Any, knob: Knob) -> Any:
        key = self.state_key(knob)
        common = {"key": key, "help": knob.help or None}
        if knob.widget == "toggle":
            return box.toggle(knob.label, **common)
        if knob.widget == "select":
            return box.selectbox(knob.label, knob.choices, format_func=knob.display, **common)
        if knob.widget == "select_slider":  # a slider over a "choice" knob's options (powers of two, say)
            return box.select_slider(knob.label, knob.choices, format_func=knob.display, **common)
        if knob.widget == "segmented":
            value = box.segmented_control(knob.label, knob.choices, format_func=knob.display, **common)
            return knob.default if value is None else value
        if knob.widget == "multiselect":
            return box.multiselect(knob.label, knob.options, format_func=knob.display, **common)
        lo, hi = knob.bounds
        if knob.widget == "number":
            return box.number_input(knob.label, min_value=lo, max_value=hi, step=knob.step, format=knob.fmt,
                                    **common)
        # (a value, though the state set by _init_state is what shows: without one, Streamlit copies the whole
        # session state to learn whether the slider is a range, on every rerun, for every slider)
        return box.slider(knob.label, min_value=lo, max_value=hi, value=knob.default, step=knob.step,
                          format=knob.fmt, **common)

    def _sync_url(self, values: dict[str, Any]) -> None:
        for knob in self.knobs:
            value = values[knob.key]
            set_param(knob.key, None if value == knob.default else knob.to_url(value))


def preset_picker(page: str, presets: Sequence[Any], container: Any = None) -> Any:
    """A preset select box (in the lesson's order: the article's example first, or on Preemption after the toy
    pool), synced with ``?preset=``. Returns the Preset."""
    keys = [p.key for p in presets]
    titles = {p.key: p.title for p in presets}
    state_key = f"{page}.preset"
    if state_key not in st.session_state:
        wanted = st.query_params.get(PRESET_PARAM, keys[0])
        if wanted not in keys:
            st.warning(f"The link's preset {as_code(wanted)} does not exist on this page; showing "
                       f"**{titles[keys[0]]}** instead.", icon=":material/warning:")
            wanted = keys[0]
        st.session_state[state_key] = wanted
    box = container if container is not None else st
    key = box.selectbox("Preset", keys, format_func=titles.get, key=state_key,
                        help="Scenarios that each make one point; the article's example comes first.")
    set_param(PRESET_PARAM, None if key == keys[0] else key)
    return presets[keys.index(key)]
