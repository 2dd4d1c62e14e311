"""The clients of a generated workload, in the sidebar: how many, and each one's share, pattern and lengths (the
Fairness lesson's knobs, ``lessons/fairness/clients.py``); a collapsed panel per client, or one table past a handful."""

from __future__ import annotations

from typing import Any

import streamlit as st

from lessons.fairness import clients as fairness_clients
from lessons.fairness import lesson
from sim.config import EngineConfig
from sim.workload import WorkloadSpec

from . import knobs, page
from .lesson import LessonPage
from .wording import safe_id


def client_settings(lp: LessonPage, config: EngineConfig) -> tuple[WorkloadSpec | None, EngineConfig]:
    """The lesson's workload with the clients as set in the sidebar, and ``config`` with their weights (the
    workload is None for a scenario of plain requests: an upload without a generator)."""
    base = lp.base
    if base.workload is None:
        return None, config
    shares = fairness_clients.as_shares(base.workload)
    workload = lp.workload(lesson.LESSON, shares)
    st.sidebar.subheader("Clients")
    num_clients = lp.knob_panel(f"{lesson.LESSON}.clients",
                                [fairness_clients.num_clients_knob(shares)]).render()["clients"]
    specs = fairness_clients.client_specs(shares, num_clients)
    values: dict[str, dict[str, Any]] = {}
    if len(specs) > fairness_clients.MAX_CLIENT_PANELS:  # one table, not a panel of sliders per client
        st.sidebar.caption(f"{len(specs):,} clients: their settings are one table (a panel each past "
                           f"{fairness_clients.MAX_CLIENT_PANELS} would be too many). Edits to it are not kept in the "
                           "link.")
        table = st.sidebar.data_editor(fairness_clients.client_settings_table(specs, shares, base.config),
                                       disabled=["client"], hide_index=True,
                                       key=f"{lesson.LESSON}.client_table.{lp.scope}")
        values = fairness_clients.client_values_from_table(table, specs, shares, base.config)
    else:
        for spec in specs:  # one collapsed box per client; a bad link value still warns in the main area
            box = st.sidebar.expander(f"Client {safe_id(spec.client_id)}", expanded=False)  # (label: Markdown)
            values[spec.client_id] = lp.knob_panel(
                f"{lesson.LESSON}.client.{spec.client_id}", fairness_clients.client_knobs(spec, shares, base.config),
                f"Client {safe_id(spec.client_id)}").render(box)
    # (a setting that stops the page here still gets the way back to the preset's settings)
    workload = page.guarded(lambda: _in_sidebar_terms(fairness_clients.apply_clients, workload, specs, values),
                            on_stop=lp.show_changes)
    st.sidebar.caption(fairness_clients.describe_clients(workload))
    return workload, fairness_clients.apply_client_weights(config, specs, values)


def _in_sidebar_terms(fn: Any, *args: Any) -> Any:
    with knobs.in_sidebar_terms():  # (a client's setting the generator refuses, said by its knob's label)
        return fn(*args)
