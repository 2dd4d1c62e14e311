"""The hostile corpus of the link and file fuzzer (issue 40, item 2): Markdown, HTML, code-span breakers, blank
lines, control characters, other scripts' digits, huge values. Every entry that could draw something holds one of
``tests.app.markup.MARKERS`` (a host "evil.example", "PWNED", "Session expired", "Log in"), so that a heading, link
or image made from it is told apart from the page's own. The AppTest layer (tests/app/test_link_fuzz.py) runs all
of it; the Chromium layer (tests/browser/test_link_fuzz_browser.py) the ``BROWSER_SAMPLE``.
"""

from __future__ import annotations

CORPUS: dict[str, str] = {
    # Markdown that a blank line lets out of a code span or a sentence
    "blank line, heading, link": "\n\n# Session expired\n\n[Log in](https://evil.example/x)",
    "blank line, image": "\n\n![](http://evil.example/b.png)",
    "CRLF heading": "\r\n\r\n# PWNED\r\n",
    "setext heading": "PWNED\n===",
    "line separator": "\u2028# PWNED\u2029![](//evil.example/s.png)",
    "list and quote": "- PWNED\n> [Log in](//evil.example)",
    # code-span breakers
    "backtick image": "`![](//evil.example/g.png)",
    "two backticks": "``![](//evil.example/g2.png)``",
    "fence": "```\n# PWNED\n```",
    # links, images, autolinks
    "markdown link": "[Log in](//evil.co)",
    "image": "![PWNED](//evil.example/p.png)",
    "reference link": "[Log in][x]\n\n[x]: //evil.example/r",
    "autolink": "<https://evil.example/a>",
    "bare URL": "https://evil.example/u",
    "www": "www.evil.example",
    "e-mail": "PWNED@evil.example",
    # HTML, entities, formulas, Streamlit's directives, plotly's templates
    "img tag": "<img src=//evil.example/i.png onerror=alert(1)>",
    "a tag": "<a href='//evil.example'>Log in</a>",
    "script": "'\"><script>PWNED</script>",
    "entities": "&#91;Log in&#93;&#40;//evil.example&#41;",
    "formula": "$\\href{//evil.example}{PWNED}$",
    "directives": ":red[PWNED] :material/home: :evil:",
    "hover template": "%{x}PWNED%{customdata[0]}",
    # control characters, bidi
    "escape sequences": "\x1b]0;PWNED\x07\x1b[2J\x00",
    "bidi override": "\u202ePWNED evil",
    # numbers a parser might take
    "superscript two": "²",
    "arabic-indic three": "٣",
    "fullwidth digits": "１２",
    "5,000 digits": "9" * 5000,
    "negative": "-1",
    "overflow float": "1e999",
    "nan": "nan",
    "underscored": "1_000",
    "empty": "",
    "commas": ",,,",
    # size
    "20,000 characters": "PWNED " + "x" * 20_000,
}

# The entries a file's text (a name, an id, a cell) takes: all but the numbers, which only a link's number settings
# read (a cell's numbers: tests/ui/test_outside_text.py).
NUMBERS = ("superscript two", "arabic-indic three", "fullwidth digits", "5,000 digits", "negative", "overflow float",
           "nan", "underscored", "commas")
TEXT_ENTRIES = tuple(name for name in CORPUS if name not in NUMBERS)

# The entries the Chromium layer runs on every page (each one a different way out).
BROWSER_SAMPLE = ("blank line, heading, link", "blank line, image", "backtick image", "img tag", "superscript two")
