"""sim/untrusted.py (issue 40): the one strict reader of numbers from outside, control characters shown as escapes,
and CSV cells a spreadsheet would run."""

from __future__ import annotations

import pytest

from sim.untrusted import (
    FORMULA_STARTS,
    decimal_number,
    from_spreadsheet_cell,
    printable,
    spreadsheet_cell,
    whole_number,
)

# '²' and '¹' pass str.isdigit() and fail int(); '٣' (Arabic-Indic three) passes both; 5,000 digits pass isdigit() and
# stop int() (Python's 4,300-digit limit); the rest int() or float() would take.
NOT_WHOLE = ["²", "¹", "٣", "9" * 5000, "", " ", "+", "-", "1_000", "0x10", "1e3", "1.5", "nan", "inf", "7\n", "7\x00",
             "--1", "1-", "１"]


@pytest.mark.parametrize("text", NOT_WHOLE, ids=repr)
def test_whole_number_refuses_what_is_not_ascii_digits(text):
    with pytest.raises(ValueError, match="must be a whole number from 0 to 100"):
        whole_number(text, 0, 100)


def test_whole_number_reads_ascii_digits_in_range():
    assert whole_number("7", 0, 100) == 7
    assert whole_number(" 007 ", 0, 100) == 7  # (spaces around it, leading zeros)
    assert whole_number("-3", -5, 5) == -3
    with pytest.raises(ValueError, match="from -5 to 5"):
        whole_number("6", -5, 5)
    with pytest.raises(ValueError):
        whole_number("1" + "0" * 30, 0, 10**40)  # (past MAX_NUMBER_CHARS, whatever the range)


@pytest.mark.parametrize("text", ["²", "١.٥", "nan", "inf", "-inf", "1_0", "1e5000" + "0" * 30, "9" * 5000, "0x1p3",
                                  "1..2", ".", "e3", ""], ids=repr)
def test_decimal_number_refuses_what_is_not_an_ascii_number(text):
    with pytest.raises(ValueError, match="must be a number from"):
        decimal_number(text, -1e300, 1e300)


def test_decimal_number_reads_ascii_numbers():
    assert decimal_number("2.5", 0, 10) == 2.5 and decimal_number("-1e-3", -1, 1) == -0.001
    assert decimal_number(".5", 0, 1) == 0.5 and decimal_number("3.", 0, 10) == 3.0
    with pytest.raises(ValueError):
        decimal_number("1e999", 0, 1e308)  # (inf: out of every range)


def test_printable_escapes_every_control_character_and_keeps_the_rest():
    assert printable("r12 ✓ é 名前") == "r12 ✓ é 名前"
    assert printable("a\nerror: forged") == "a\\nerror: forged"
    assert printable("\x1b]0;title\x07\x1b[2J") == "\\x1b]0;title\\x07\\x1b[2J"
    assert printable("x\u202ey\u2028z\x85") == "x\\u202ey\\u2028z\\x85"  # (bidi override, line separator, NEL)
    assert printable("\ud800") == "\\ud800"  # (a lone surrogate: printing it would raise)
    assert printable("C:\\dir") == "C:\\dir"  # (no control character: the backslash stays single)
    assert printable("C:\\n\n") == "C:\\\\n\\n"  # (with one: a typed backslash-n is told apart from a newline)
    assert printable("x" * 50, limit=10) == "x" * 10 + "…"
    for text in ("a\r\nb", "\x00", "\x7f", "\x9b31m"):
        assert printable(text).isprintable()


@pytest.mark.parametrize("cell", ["=HYPERLINK(\"http://evil.example\")", "=cmd|' /C calc'!A0", "+1+1", "-2+3",
                                  "@SUM(A1)", "\t=1", "\r=1", "'quoted"])
def test_a_cell_a_spreadsheet_would_run_gets_a_quote_and_reads_back(cell):
    written = spreadsheet_cell(cell)
    assert written.startswith("'") and not written.startswith(FORMULA_STARTS)
    assert from_spreadsheet_cell(written) == cell


def test_numbers_in_a_number_column_stay_numbers_and_other_text_there_is_neutralised():
    for number in ("-5", "-1.5e3", "+2", "1,000"):
        assert spreadsheet_cell(number, numeric=True) == number
    assert spreadsheet_cell("-5") == "'-5"  # (an id "-5" is text: quoted)
    assert spreadsheet_cell("=1+1", numeric=True) == "'=1+1"
    assert spreadsheet_cell("r1") == "r1" and spreadsheet_cell("A B") == "A B"
