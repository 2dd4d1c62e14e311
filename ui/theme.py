"""One palette and one set of sizes for every page and chart.

Colours are the Okabe-Ito colour-blind-safe palette. States that must stay apart in grayscale print also differ
in lightness or carry a bar pattern (see STATE_PATTERNS). A status, a client or a policy has the same colour on
every page. Presentation mode (for projectors) scales fonts and lines up; the print theme (course notes) gives figures
a fixed size for half a page and titles that name the lesson and preset.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

# Okabe-Ito.
BLACK = "#000000"
ORANGE = "#E69F00"
SKY_BLUE = "#56B4E9"
GREEN = "#009E73"
YELLOW = "#F0E442"
BLUE = "#0072B2"
VERMILLION = "#D55E00"
PURPLE = "#CC79A7"
GREY = "#999999"
LIGHT_GREY = "#D9D9D9"
WHITE = "#FFFFFF"  # paper and plot background

# Gantt segment states (request lifecycle). Lightness: waiting lightest, decode darkest.
STATE_COLORS: dict[str, str] = {
    "waiting": LIGHT_GREY,  # in the queue, not yet admitted
    "prefill": ORANGE,  # computing its prompt (or re-computing after a preemption)
    "decode": BLUE,  # generating tokens somebody reads
    "preempted": VERMILLION,  # evicted, waiting to be recomputed
    "swapped": PURPLE,  # evicted, KV parked in CPU memory
    "stalled": SKY_BLUE,  # running but given no tokens this step (budget used up)
    "wasted": BLACK,  # generating tokens nobody reads
}
# (stalled: its sky blue and prefill's orange are equally light, so print in grey needs the pattern)
STATE_PATTERNS: dict[str, str] = {"preempted": "/", "swapped": "x", "wasted": ".", "stalled": "-"}
STATE_LABELS: dict[str, str] = {
    "waiting": "waiting in queue",
    "prefill": "prefill",
    "decode": "decode",
    "preempted": "preempted (will recompute)",
    "swapped": "swapped to CPU",
    "stalled": "running, no tokens this step",
    "wasted": "generating for nobody",
}
# A chart legend says what the two jargon words mean (hover text keeps the short labels).
STATE_LEGEND: dict[str, str] = {**STATE_LABELS, "prefill": "prefill (computing the prompt)",
                                "decode": "decode (a new token each step)"}

# Clients, in order of first appearance in a workload. The first four (the Fairness page's most) avoid vermillion:
# it is "preempted" in the Gantt chart that colours running requests by client, and the rate limit's line.
CLIENT_COLORS = (BLUE, ORANGE, GREEN, PURPLE, SKY_BLUE, VERMILLION, YELLOW, GREY)

# Policies and mechanisms, so a comparison keeps its colours across pages. Priority (Queueing) and LCF (Fairness)
# share purple: they never meet on a page, and LCF there must stay clear of the clients' blue and orange.
POLICY_COLORS: dict[str, str] = {
    "fcfs": GREY,
    "priority": PURPLE,
    "sjf": BLUE,
    "sjf_predicted": SKY_BLUE,
    "vtc": GREEN,
    "lcf": PURPLE,
    "rate_limit": VERMILLION,
}
# Requests, by row (the Preemption page and the home page's engine step). They skip the colours that mean
# something there: vermillion (preempted, and the pale red of a block freed this step), purple (swapped, the CPU swap
# line) and grey ("other requests" in the per-request KV chart).
REQUEST_COLORS = (BLUE, ORANGE, GREEN, SKY_BLUE, YELLOW, BLACK)
CACHED_FREE_LABEL = "free, prefix cached"  # free blocks still holding a reusable prefix (short: legends are narrow)
SERIES_COLORS = (BLUE, ORANGE, GREEN, VERMILLION, PURPLE, SKY_BLUE, GREY, YELLOW)  # for anything else, in order


def client_color(index: int) -> str:
    return CLIENT_COLORS[index % len(CLIENT_COLORS)]


# A client's line in the print theme: a dash as a second cue beside its colour (grey print, colour-blind readers);
# no dotted line, which the charts keep for "all clients".
CLIENT_DASHES = ("solid", "dash", "dashdot", "longdash", "longdashdot")


def request_color(row: int) -> str:
    return REQUEST_COLORS[row % len(REQUEST_COLORS)]


def series_color(index: int) -> str:
    return SERIES_COLORS[index % len(SERIES_COLORS)]


PRINT_WIDTH = 640  # px: a print-theme figure's width (its camera button and the course notes save this size)
PRINT_TITLE_EXTRA = 60  # px more a print figure is high: its subtitle (the lesson and preset), a title's second line


@dataclass(frozen=True)
class ChartStyle:
    """Sizes for one rendering target. ``presentation`` is for projectors: bigger text, thicker lines. ``printed`` is
    the print theme of course notes (``ui/notes``): a fixed width of ``PRINT_WIDTH`` px with text that stays legible
    when the figure is printed half a page wide (20 px at 640 px: ~7.5 pt at 85 mm), thicker lines and larger
    markers, and ``figure_label`` (the lesson and preset) under each figure's title."""

    presentation: bool = False
    export_format: str = "png"  # what the camera button downloads: png (3x scale) or svg
    file_prefix: str = "scheduler-lab"  # exported figures' file names start with it (a lesson adds its preset)
    printed: bool = False
    figure_label: str = ""  # what a figure belongs to ("Queueing lesson · <the preset's title>"): a print subtitle

    @property
    def font_size(self) -> int:
        return 20 if self.presentation or self.printed else 14

    @property
    def root_font_px(self) -> int:
        """The page's root font size (1 rem): Streamlit's 16 px, 20 px in presentation mode (ui.page's CSS)."""
        return 20 if self.presentation else 16

    @property
    def title_size(self) -> int:
        return 24 if self.presentation else 22 if self.printed else 17

    @property
    def line_width(self) -> float:
        return 4.0 if self.presentation else 3.0 if self.printed else 2.2

    @property
    def outline_width(self) -> float:
        """A box drawn around something to point at it (a highlighted request, your cell of a sweep)."""
        return 4.0 if self.presentation else 3.0 if self.printed else 2.5

    @property
    def marker_size(self) -> int:
        return 12 if self.presentation else 10 if self.printed else 8

    @property
    def large_text(self) -> bool:
        """Text large for the figure's width (presentation mode, the print theme): a builder puts a long label on
        lines of its own, or panels under each other, where side by side they would run off the figure."""
        return self.presentation or self.printed

    def chars_per_line(self, size: int) -> int:
        """About how many characters of text at ``size`` px fit across a print figure (0: no fixed width)."""
        return int((self.width - 24) / (0.52 * size)) if self.width else 0

    @property
    def subtitle_px(self) -> int:
        """The height the print theme's line(s) under a title take (the lesson and preset): room a figure with
        fixed margins keeps above its plot; 0 on screen."""
        if not (self.printed and self.figure_label):
            return 0
        lines = len(textwrap.wrap(self.figure_label, self.chars_per_line(self.font_size - 3)))
        return int(lines * (self.font_size - 3) * 1.45) + 10

    @property
    def width(self) -> int | None:
        """A figure's fixed width in px (the print theme's), or None: as wide as its place on the page."""
        return PRINT_WIDTH if self.printed else None

    def client_dash(self, index: int) -> str:
        """A client's line: solid on screen (its colour tells it apart), a dash of its own in print."""
        return CLIENT_DASHES[index % len(CLIENT_DASHES)] if self.printed else "solid"

    def height(self, base: int) -> int:
        """A figure's height for its builder's ``base`` px: larger text needs more; a print figure also has the
        lesson and preset under its title, and its title may take two lines."""
        if self.printed:
            return int(base * 1.25) + PRINT_TITLE_EXTRA
        return int(base * 1.25) if self.presentation else base


def plotly_config(filename: str, style: ChartStyle, size: tuple[int, int] | None = None) -> dict:
    """st.plotly_chart config: the camera button exports at print resolution with a sensible file name; ``size``
    (width, height in px) fixes the exported figure's size (the print theme's), whatever its width on the page."""
    fmt = style.export_format if style.export_format in ("png", "svg") else "png"
    image = {"format": fmt, "filename": filename, "scale": 3 if fmt == "png" else 1}
    if size is not None:
        image.update(width=size[0], height=size[1])
    return {
        "displaylogo": False,
        "toImageButtonOptions": image,
        "modeBarButtonsToRemove": ["lasso2d", "select2d"],
    }
