"""The server's settings that a reader meets: no traceback or server path ever reaches a page."""

import tomllib

from tests.conftest import REPO_ROOT


def test_unexpected_errors_show_no_details():
    config = tomllib.loads((REPO_ROOT / ".streamlit" / "config.toml").read_text())
    assert config["client"]["showErrorDetails"] == "none"  # the generic message only; the details go to the log


def test_a_new_slider_value_stops_the_run_in_progress():
    config = tomllib.loads((REPO_ROOT / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["fastReruns"] is True  # issue 24: progress elements are where a rerun is superseded


def test_the_server_watches_no_source_files():
    config = tomllib.loads((REPO_ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["fileWatcherType"] == "none"  # issue 24: work after every rerun a class never needs


def test_no_full_garbage_collection_after_each_run():
    config = tomllib.loads((REPO_ROOT / ".streamlit" / "config.toml").read_text())
    assert config["runner"]["postScriptGC"] is False  # issue 24: 75% of a class's server time under the GIL
