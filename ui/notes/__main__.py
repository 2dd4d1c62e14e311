"""``python -m ui.notes LESSON|all [--out DIR] [--preset KEY[,KEY...]] [--format svg,png,html] [--theme print]``:
course notes for each lesson and preset, with a progress bar on the terminal. Exit codes: 0 done, 1 a page or a
figure failed (one line says which), 2 a name that does not exist or no Chromium (one line says what is allowed,
or what is missing and how to install it).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import NoReturn

PROG = "python -m ui.notes"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line and exit 2, as for the names checked below
        _fail(message, 2)


def _fail(message: str, code: int) -> NoReturn:
    print(f"{PROG}: error: {message}", file=sys.stderr)
    raise SystemExit(code)


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog=PROG, description="Export each lesson's charts (SVG, PNG at 3x, interactive HTML), the "
                                            "scenarios behind them and a notes page per lesson (Markdown and HTML).")
    parser.add_argument("lesson", help="a lesson id (queueing, fairness, cancellation, preemption, budget) or all")
    parser.add_argument("--out", default="notes", help="the folder to write into (default: notes)")
    parser.add_argument("--preset", action="append", default=[],
                        help="only these presets: keys joined by commas (or the option repeated), 'default' for "
                             "each lesson's first (default: every preset)")
    parser.add_argument("--format", default="svg,png,html", help="figure files to write (default: svg,png,html)")
    parser.add_argument("--theme", default="print", help="print (default: white, larger text, a fixed width) or "
                                                         "screen (the page's own sizes)")
    args = parser.parse_args(argv)

    from streamlit import config, logger  # (after the arguments: --help needs neither Streamlit nor plotly)

    # The pages run without a server, and Streamlit warns so at every import ("No runtime found"): expected.
    config.set_option("logger.level", "error")
    logger.set_log_level("error")
    from . import export, render

    try:
        jobs = export.plan(args.lesson, [k.strip() for keys in args.preset for k in keys.split(",") if k.strip()])
        formats = export.parse_formats(args.format)
        if args.theme not in export.THEMES:
            raise export.UsageError(f"theme: {args.theme!r} is not one of: {', '.join(export.THEMES)}")
        render.find_chromium()  # (before the pages run: say so at once)
    except export.UsageError as e:
        _fail(str(e), 2)
    except render.BrowserMissing as e:
        _fail(str(e), 2)

    from tqdm import tqdm

    started = time.perf_counter()
    with tqdm(total=0, unit="file", file=sys.stderr, dynamic_ncols=True, leave=True) as bar:
        def progress(what: str, done: int, total: int) -> None:
            bar.total, bar.n = total, done
            bar.set_description_str(what[:48].ljust(48), refresh=False)
            bar.refresh()

        try:
            pages = export.export(jobs, Path(args.out), formats, args.theme, progress)
        except render.BrowserMissing as e:
            bar.close()
            _fail(str(e), 2)
        except (render.RenderError, export.PageError) as e:
            bar.close()
            _fail(str(e), 1)
        except KeyboardInterrupt:
            bar.close()
            _fail("interrupted (the files written so far are left as they are)", 130)
    elapsed = time.perf_counter() - started
    print(f"Wrote {', '.join(str(p) for p in pages)} (and .html beside each) in {elapsed:.1f} s.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
