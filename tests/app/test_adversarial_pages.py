"""Issue 19 on the pages: what a hostile or careless upload does to a page (the rest of the audit is in
tests/adversarial/). An upload with many clients gets one table, not a panel of sliders per client; one past the
app's limits, or pushed past them by a slider, gets a message, never a run that exhausts the server."""

from __future__ import annotations

import dataclasses
import re

import pytest
from streamlit.testing.v1 import AppTest

from lessons.fairness import clients as fairness_clients
from sim import RequestSpec, presets
from sim.scenario import Scenario, dumps, scenario_to_dict
from sim.workload import ClientSpec, generate
from tests.app.conftest import ROOT, as_read

PAGE = "pages/2_Fairness.py"


def _open(scenario: Scenario, preset: str = "article_fairness") -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.switch_page(PAGE)
    at.query_params["preset"] = preset
    at.session_state["fairness.uploaded"] = scenario_to_dict(scenario)  # what the upload box stores
    return at.run()


def test_twelve_clients_get_one_table_instead_of_a_panel_each():
    base = presets.get("article_fairness").scenario
    clients = tuple(ClientSpec(f"client-{i}", share=1.0) for i in range(12))
    workload = base.workload.replace(clients=clients, num_requests=120)
    scenario = Scenario("twelve clients", base.config, tuple(generate(workload)), workload=workload)
    at = _open(scenario)
    assert not at.exception and not at.error
    assert not any((s.key or "").startswith("fairness.client.") for s in at.slider)  # no per-client slider
    assert not [e for e in at.expander if (e.label or "").startswith("Client ")]
    tables = [d for d in at.sidebar if type(d).__name__ == "Dataframe"]  # (AppTest shows a data editor so)
    assert len(tables) == 1
    assert tables[0].value["client"].tolist() == [f"client-{i}" for i in range(12)]
    assert tables[0].value["Share of the arrivals (%)"].tolist() == [8] * 12  # 1/12 each, rounded
    assert any("12 clients: their settings are one table (a panel each past 8" in c.value for c in at.sidebar.caption)
    assert fairness_clients.MAX_CLIENT_PANELS == 8


def test_an_upload_past_the_apps_clients_limit_is_refused_with_the_figure():
    config = presets.get("article_fairness").scenario.config.replace(client_weights=())
    requests = tuple(RequestSpec(f"r{i}", i, 20, 20, client_id=f"c{i}") for i in range(101))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.switch_page(PAGE)
    at.query_params["mode"] = "free"  # the lesson's free page (a first visit opens the guided path)
    at.run()
    data = dumps(Scenario("101 clients", config, requests)).encode()
    at.file_uploader(key="fairness.upload.0").set_value(("many.json", data, "application/json")).run()
    assert any("clients: it has 101 distinct client ids, and this app runs at most 100" in as_read(e.value)
               for e in at.error)


IMAGE, LINK = "![x](https://evil.example/c.png)", "[l](https://evil.example)"


def _live_markdown(at: AppTest) -> list[str]:
    """Every text on the page that Streamlit draws as Markdown (messages, captions, expander and metric labels,
    widget labels) holding a link or an image outside a code span, other than the lessons' own links to the
    glossary (``ui.glossary.term_link``: the opening question links its terms)."""
    texts = [e.value for kind in ("caption", "markdown", "info", "warning", "error", "success") for e in at.get(kind)]
    texts += [e.label for e in [*at.expander, *at.metric, *at.slider, *at.selectbox, *at.multiselect, *at.button]]
    own = r"\]\(Glossary#[a-z0-9-]+\)"
    return [t for t in texts if "](" in re.sub(own, "]", re.sub(r"`[^`]*`", "", t or ""))]


@pytest.mark.parametrize("lesson, page", [("fairness", PAGE), ("preemption", "pages/4_Preemption.py"),
                                          ("queueing", "pages/1_Queueing.py")])
def test_ids_from_a_file_are_text_in_every_panel_caption_and_notice(lesson, page):
    # An upload's client ids named the Fairness page's client panels, its cards' captions and its notices, and a
    # request id the Preemption page's cost caption, as Markdown: a remote image drawn in the sidebar.
    if lesson == "fairness":
        base = presets.get("article_fairness").scenario
        workload = base.workload.replace(clients=(ClientSpec(IMAGE, share=0.5), ClientSpec(LINK, share=0.5)))
        scenario = Scenario("hostile", base.config.replace(client_weights=()), tuple(generate(workload)),
                            workload=workload)
    else:
        base = presets.presets_for(lesson)[0].scenario
        scenario = Scenario("hostile", base.config, tuple(
            dataclasses.replace(r, request_id=f"{IMAGE if i % 2 else LINK}{i}", client_id=IMAGE if i % 2 else LINK)
            for i, r in enumerate(base.requests)))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=180)
    at.switch_page(page)
    at.query_params["mode"] = "free"
    at.session_state[f"{lesson}.uploaded"] = scenario_to_dict(scenario)
    at.run()
    assert not at.exception and any("Your scenario" in c.value for c in at.caption)
    assert not _live_markdown(at)
    if lesson == "fairness":
        assert [e.label for e in at.expander if e.label.startswith("Client ")] == [
            r"Client \!\[x\]\(https\:" "\u200b" r"//evil.example/c.png\)",
            r"Client \[l\]\(https\:" "\u200b" r"//evil.example\)"]
