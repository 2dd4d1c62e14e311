"""The command line's own output (issue 40, item 5): an id, a client_weights key or a scenario name from a file is
printed with its control characters escaped (no forged second line on stderr, no escape sequence reaching the
terminal), and a number argument that is not ASCII digits ('²', '¹', 5,000 digits) is one line and exit 2, not a
traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sim import presets
from sim.__main__ import main
from sim.scenario import scenario_to_dict

FORGED = "A\nerror: all good \x1b[31mred"
ANSI_NAME = "\x1b]0;pwned\x07\x1b[2Jcleared"


def _file(tmp_path: Path, change) -> str:
    data = scenario_to_dict(presets.get("article_hol").scenario)
    change(data)
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(data))
    return str(path)


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _terminal_safe(text: str) -> bool:
    return "\x1b" not in text and "\x07" not in text and all(line.isprintable() for line in text.splitlines())


def test_a_client_weights_key_with_a_newline_is_one_escaped_line(tmp_path, capsys):
    path = _file(tmp_path, lambda d: d["config"].update(client_weights={FORGED: 5000}))
    code, out, err = _run(capsys, "run", path)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and _terminal_safe(err)
    assert "client_weights[A\\nerror: all good \\x1b[31mred]" in err


def test_a_duplicate_id_with_a_newline_is_one_escaped_line(tmp_path, capsys):
    def change(d):
        d["requests"][0]["id"] = d["requests"][1]["id"] = FORGED
    code, _, err = _run(capsys, "run", _file(tmp_path, change))
    assert code == 2 and err.count("\n") == 1 and _terminal_safe(err)


def test_a_scenario_name_with_escape_sequences_is_printed_escaped(tmp_path, capsys):
    path = _file(tmp_path, lambda d: d.update(name=ANSI_NAME))
    code, out, err = _run(capsys, "run", path, "--out", str(tmp_path / "result.json"))
    assert code == 0 and err == ""
    assert _terminal_safe(out) and out.startswith("\\x1b]0;pwned\\x07\\x1b[2Jcleared: 3 requests")
    assert json.loads((tmp_path / "result.json").read_text())["name"] == ANSI_NAME  # (the file keeps it as it is)


@pytest.mark.parametrize(("args", "message"), [
    (("--seed", "²"), "error: --seed: must be a whole number from 0 to 2,147,483,647, got '²'"),
    (("--seed", "1", "--count", "¹"), "error: --count: must be a whole number from 1 to 100, got '¹'"),
    (("--seed", "٣"), "error: --seed: must be a whole number"),
    (("--seed", "9" * 5000), "error: --seed: must be a whole number from 0 to 2,147,483,647, got '999"),
    (("--seed", "1", "--count", "9" * 5000), "error: --count: must be a whole number from 1 to 100"),
])
def test_problems_refuses_numbers_that_are_not_ascii_digits_in_one_line(capsys, args, message):
    code, out, err = _run(capsys, "problems", "queueing", *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(message) and len(err) < 200


def test_bench_repeat_takes_ascii_digits_only(capsys):
    for bad in ("²", "9" * 5000):
        with pytest.raises(SystemExit) as stop:
            main(["bench", "--repeat", bad])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert "--repeat: must be a whole number >= 1, got" in err and len(err) < 400
