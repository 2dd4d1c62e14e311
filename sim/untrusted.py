"""Text from outside the program (a link, a file, a command line, a table cell), read and shown safely: the one
strict reader of numbers, the one escape of control characters for a terminal or a message, and the one rule for
text a spreadsheet would run. (Markdown on a page: ``ui/wording.py``'s ``plain`` and ``as_code``, built on
``printable``.)

Why strict: ``str.isdigit()`` says yes to '²' and '٣', which ``int()`` then refuses or reads as 3; ``int()`` takes
'+5', ' 5 ', '5_000' and Arabic-Indic digits, and stops with a ValueError past 4,300 digits; ``float()`` takes
'١.٥', 'nan' and '1_0'. Here a number is ASCII digits and at most ``MAX_NUMBER_CHARS`` characters, or it is refused
with a message that says what is allowed.
"""

from __future__ import annotations

import re
import unicodedata

MAX_NUMBER_CHARS = 24  # a number from outside is at most this long (int64 has 19 digits; a float's text ~24)

_WHOLE = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]{1,3})?")


def whole_number(text: str, lo: int, hi: int) -> int:
    """``text`` as a whole number from ``lo`` to ``hi``: ASCII digits, a '-' first where ``lo`` is negative, spaces
    around it allowed, at most ``MAX_NUMBER_CHARS`` characters. ValueError("must be a whole number from LO to HI")
    otherwise (the caller names the field)."""
    allowed = f"must be a whole number from {lo:,} to {hi:,}"
    text = text.strip(" \t")
    if len(text) > MAX_NUMBER_CHARS or not _WHOLE.fullmatch(text):
        raise ValueError(allowed)
    value = int(text)
    if not lo <= value <= hi:
        raise ValueError(allowed)
    return value


def decimal_number(text: str, lo: float, hi: float) -> float:
    """``text`` as a number from ``lo`` to ``hi``: ASCII digits with an optional '-', '.' and exponent ('2.5',
    '1e-3'), spaces around it allowed, at most ``MAX_NUMBER_CHARS`` characters (no 'nan', 'inf', '1_0' or other
    scripts' digits). ValueError("must be a number from LO to HI") otherwise."""
    allowed = f"must be a number from {lo:,.10g} to {hi:,.10g}"
    text = text.strip(" \t")
    if len(text) > MAX_NUMBER_CHARS or not _DECIMAL.fullmatch(text):
        raise ValueError(allowed)
    value = float(text)
    if not lo <= value <= hi:
        raise ValueError(allowed)
    return value


_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def _escape(char: str) -> str:
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _is_control(char: str) -> bool:
    """A character a terminal or a renderer acts on instead of showing: C0 and C1 controls (escape sequences, a
    newline, a bell), format characters (bidi overrides, zero-width joiners), line and paragraph separators."""
    return unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp", "Cs", "Co", "Cn")


def printable(text: str, limit: int | None = None) -> str:
    """``text`` with every control character shown as its escape (a newline as ``\\n``, ESC as ``\\x1b``, a bidi
    override as ``\\u202e``, a lone surrogate as ``\\ud800``), so that it is one line that prints as written: an
    id cannot forge a second line on stderr, a name cannot set the terminal's title or clear the screen. Text with
    such a character also gets its backslashes doubled (a typed "\\n" is not a newline shown); text without one
    comes back as it is. ``limit``: cut to that many characters first, with an ellipsis."""
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    if text.isprintable():  # (the usual id or name: nothing to do)
        return text
    if not any(_is_control(c) for c in text):
        return text
    return "".join(_escape(c) if _is_control(c) or c == "\\" else c for c in text)


# ---- spreadsheets (CSV downloads) -------------------------------------------------------------------------------
# OWASP's CSV injection rule: a cell starting with one of these is a formula to a spreadsheet (=HYPERLINK(...),
# =cmd|' /C calc'!A0, @SUM(...)); a single quote first makes it text. A cell that starts with the quote itself gets
# one more, so that reading the quote back off (``from_spreadsheet_cell``) gives every cell as it was.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


_NUMBER = re.compile(r"[-+]?[0-9][0-9,_]*(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?")


def spreadsheet_cell(text: str, numeric: bool = False) -> str:
    """A cell for a CSV download: ``'`` before one a spreadsheet would run as a formula (or one that starts with
    ``'``). ``numeric``: a column of numbers, where a cell that reads as a number ("-5", "-1.5e3") stays as it is
    (a negative number is no formula); any other text in it is still neutralised."""
    if numeric and _NUMBER.fullmatch(text):
        return text
    return "'" + text if text.startswith((*FORMULA_STARTS, "'")) else text


def from_spreadsheet_cell(text: str) -> str:
    """The text ``spreadsheet_cell`` wrote: its leading quote taken off."""
    return text[1:] if text.startswith("'") else text
