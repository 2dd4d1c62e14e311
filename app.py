"""Scheduler Lab home page: the five questions, one engine step in a picture, links to the lessons and the
workbench."""

import streamlit as st

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

# Each lesson's question and takeaway; its file, name and icon come from the navigation (page.PAGES).
LESSONS = {
    "Queueing": ("Who waits, and in what order?",
                 "One long answer at the head of the line makes everyone behind it wait: shortest-job-first cuts "
                 "the average from 1,100 to 500 steps in the article's example, at the long request's expense."),
    "Fairness": ("Fair to whom: requests or customers?",
                 "FCFS is fair to requests, not to customers: a client sending 90% of the traffic crowds out a "
                 "trickle. The Virtual Token Counter serves the least-served customer first and keeps the GPU busy."),
    "Cancellation": ("What happens when the user closes the tab?",
                     "Tokens nobody reads are pure waste: abort at once and the slot and KV are free on the next "
                     "step; stop at the stop token, not at max_tokens."),
    "Preemption": ("What if KV memory runs out mid-answer?",
                   "The scheduler evicts a running request and later recomputes its KV (vLLM's older V0 engine "
                   "could also swap it to CPU memory and back). Constant "
                   "preemption is a sizing problem: a bigger pool or fewer slots stops it."),
    "Token budget": ("First token, or smooth streams?",
                     "Without chunked prefill an 8,000-token prompt is one 134-ms step and every stream pauses that "
                     "long; cut into 512-token chunks, the streams keep flowing and the prompt's first token comes "
                     "later. The budget trades one wait for the other."),
    "Workbench": ("What if two long requests arrive together?",
                  "Your own question: build a workload request by request (or from the generator, a preset or a "
                  "file), run up to four policies on it side by side, and read each request's time to first token "
                  "and time between tokens."),
}

lessons = [p for p in page.PAGES if p[1] in LESSONS]
for start in range(0, len(lessons), 2):  # two cards a row: four would break "Cancellation" on a 1,024-px projector
    row = lessons[start : start + 2]
    for col, (path, name, icon) in zip(st.columns(2), row, strict=False):
        question, takeaway = LESSONS[name]
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
    "scheduler **preempts** the request admitted last (the end of the running list) and puts it back at the head "
    "of the queue."
)
toy = presets.get("toy_pool").scenario
toy_trace = runner.run(toy, snapshot_every_steps=1)


@st.fragment
def engine_step() -> None:
    step = st.slider("Engine step", 0, toy_trace.num_steps - 1, value=113, key="home.step",
                     help="Step 113 is the first preemption; step 200 the re-admission.")
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
