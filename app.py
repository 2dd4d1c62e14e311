"""Scheduler Lab home page: the five questions, one engine step in a picture, links to the lessons and the
workbench."""

import streamlit as st

import lessons
from sim import presets
from ui import charts, page, runner

style = page.setup("Home")

st.title("Scheduler Lab")
st.markdown(
    "An LLM inference server runs one **engine step** after another: each step, the scheduler picks which "
    "requests run and how many tokens each computes, and every running request keeps its attention state "
    "(the **KV cache**) in fixed-size GPU memory blocks. When there is not room for everyone, somebody waits, "
    "gets evicted, or is served at somebody else's expense. This lab lets you watch those decisions, made the "
    "way vLLM's scheduler makes them, and change the knobs yourself."
)

# Each card: the page's question and what the student does there, never its answers (a guided path asks the student
# to predict them first). A lesson's card is its record in the course (``lessons.LESSONS``); the Workbench's is here.
WORKBENCH = (*page.WORKBENCH,
             "What if two long requests arrive together?",
             "Your own question: build a workload request by request (or from the generator, a preset or a file), run "
             "up to four policies on it side by side, and read each request's time to first token and time between "
             "tokens.")
CARDS = [(lesson.page, lesson.title, lesson.icon, lesson.question, lesson.summary) for lesson in lessons.LESSONS]
CARDS.append(WORKBENCH)

for start in range(0, len(CARDS), 2):  # two cards a row: four would break "Cancellation" on a 1,024-px projector
    row = CARDS[start : start + 2]
    for col, (path, name, icon, question, takeaway) in zip(st.columns(2), row, strict=False):
        with col.container(border=True, height="stretch"):  # as tall as the other card in the row
            st.subheader(f"{icon} {name}", anchor=False)  # (an anchor icon would wrap onto a line of its own)
            st.markdown(f"**{question}**")
            st.markdown(takeaway)
            st.page_link(path, label="Open the workbench" if name == "Workbench" else "Open the lesson",
                         icon=":material/arrow_forward:")

st.subheader("One engine step, up close")
st.markdown(
    "A toy engine with 32 KV blocks of 16 tokens and four batch slots serves five requests. Drag the slider: "
    "each step the **running** requests compute one token each and grow into new blocks; the **waiting** "
    "queue is admitted in order only when a slot and enough blocks are free; when the pool is full, the "
    "scheduler **preempts** a running request and puts it back in the queue (which one, and what that costs, is "
    "the Preemption lesson's question)."
)
toy = presets.get("toy_pool").scenario
toy_trace = runner.run(toy, snapshot_every_steps=1)


@st.fragment
def engine_step() -> None:
    step = st.slider("Engine step", 0, toy_trace.num_steps - 1, value=5, key="home.step",
                     help="At step 5 a fifth request arrives and waits: the four slots are taken. Drag on to see "
                          "the pool fill.")
    queues = runner.queues_at(toy, step)
    page.show_chart(charts.engine_step(toy_trace, step, queues, style), "engine-step", style)


engine_step()

st.subheader("Using this in class")
st.markdown(
    "- **Presets** on each lesson reproduce the article's numbers (first in the list; on Preemption, after a toy "
    "pool that shows the mechanism); the sliders start from the preset.\n"
    "- **Links are shareable**: every setting lives in the page's URL, so copying the address bar reproduces "
    "exactly what you see (an uploaded scenario file is the one thing a link cannot carry); a lesson keeps your "
    "settings while you visit other pages, and presentation mode stays on from page to page.\n"
    "- **Figures for notes**: each chart's camera button saves a PNG at 3x resolution, or an SVG (choose under "
    "*Display* in the sidebar, next to **presentation mode** for projectors).\n"
    "- **Step player**: each lesson plays its schedule step by step (play, pause, step, jump to the next "
    "decision; arrow keys and space), with the batch, the queue, the KV pool and the reason for every admission, "
    "refusal and preemption; a cursor moves on every chart, and the step is in the link.\n"
    "- **Scenarios** download as JSON, can be edited and uploaded again, and run from the command line with "
    "`python -m sim run scenario.json`."
)
