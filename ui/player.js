// The step player (ui/player.py mounts it): controls, the step explained for each compared run, an optional
// block map, and one cursor on every chart of the page that carries `layout.meta.cursor`. Everything moves in the
// browser from data sent once per window of steps; the server hears the step only when the player pauses (to keep
// it in the URL) or leaves the window (to send the next one). Data is written as text, never as HTML.

const PLAYERS = (window.__schedLabPlayers ||= {});
const SPEEDS = [2, 5, 10, 20, 50];
const MAX_BATCH_ROWS = 6;
const MAX_QUEUE_IDS = 10;
const MAX_MAP_CELLS = 1024;
const COMMIT_AFTER_MS = 400;
const COMMIT_WHILE_PLAYING_MS = 3000;
const SEEN_FOR_DETAIL_MS = 2500;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) if (c != null) node.append(c);
  return node;
}

const fmt = (n) => Number(n).toLocaleString("en-US");
const fmtMs = (v) => Number(v).toLocaleString("en-US", { maximumFractionDigits: v < 10 ? 2 : 1 });

// ---- per-run data, resolved once per window ----------------------------------------------------------------
function carried(sparse, n, empty) {
  const out = new Array(n);
  let last = empty;
  for (let i = 0; i < n; i++) {
    const v = sparse[String(i)];
    if (v !== undefined) last = v;
    out[i] = last;
  }
  return out;
}

function unrun(pairs) {  // [value, times, value, times, ...] (ui/timeline.py's run_lengths) -> the values
  const out = [];
  for (let j = 0; j < pairs.length; j += 2) for (let k = 0; k < pairs[j + 1]; k++) out.push(pairs[j]);
  return out;
}

// Each step's batch [row, tokens, kind, ...] from ui/timeline.py's batch_delta: the whole list ("f"), or rows gone
// ("d"), the others' new tokens and kinds by position ("c") and rows appended ("a"); a missing step repeats.
function batches(sparse, n) {
  const out = new Array(n);
  let last = [];
  for (let i = 0; i < n; i++) {
    const d = sparse[String(i)];
    if (d !== undefined) {
      if (d.f) last = d.f;
      else {
        const gone = new Set(d.d || []);
        const next = [];
        for (let j = 0; j < last.length; j += 3) if (!gone.has(last[j])) next.push(last[j], last[j + 1], last[j + 2]);
        const c = d.c || [];
        for (let j = 0; j < c.length; j += 3) { next[3 * c[j] + 1] = c[j + 1]; next[3 * c[j] + 2] = c[j + 2]; }
        last = next.concat(d.a || []);
      }
    }
    out[i] = last;
  }
  return out;
}

function prepare(run) {
  const n = run.end - run.first;
  const r = { ...run, n };
  r.counts = Object.fromEntries(Object.entries(run.counts).map(([k, v]) => [k, unrun(v)]));
  r.step_ms = unrun(run.step_ms);
  r.x_ms = [run.start_ms];  // the clock at the start of each step of the window (and at its end)
  for (let i = 0; i < n; i++) r.x_ms.push(r.x_ms[i] + r.step_ms[i]);
  r.batchAt = batches(run.batch, n);
  r.eventsAt = [];
  for (let i = 0; i < n; i++) {
    const v = run.events[String(i)];
    const flat = v === 0 ? r.eventsAt[i - 1] : v || [];
    r.eventsAt.push(flat);
  }
  // (no queues yet: the server re-runs the scenarios for their order once the player has been in view)
  r.waitingAt = run.queues ? carried(run.queues.waiting_head, n, []) : null;
  r.swappedAt = run.queues ? carried(run.queues.swapped, n, []) : null;
  r.idleAt = run.queues ? carried(run.queues.idle_running, n, []) : new Array(n).fill([]);
  if (run.blocks) {
    // checkpoints of the block codes every 100 steps: any step is at most 99 change lists away
    r.checkpoints = [];
    let codes = Int32Array.from(run.blocks.first);
    for (let i = 0; i < n; i++) {
      const ch = run.blocks.changes[String(i)];
      if (ch) for (let j = 0; j < ch.length; j += 2) codes[ch[j]] = ch[j + 1];
      if (i % 100 === 0) r.checkpoints.push(Int32Array.from(codes));
    }
  }
  return r;
}

function codesAt(run, i) {
  const base = Math.floor(i / 100);
  const codes = Int32Array.from(run.checkpoints[base]);
  for (let k = base * 100 + 1; k <= i; k++) {
    const ch = run.blocks.changes[String(k)];
    if (ch) for (let j = 0; j < ch.length; j += 2) codes[ch[j]] = ch[j + 1];
  }
  return codes;
}

// ---- the player ---------------------------------------------------------------------------------------------
export default function (component) {
  const { key, parentElement, setStateValue } = component;
  // The server sends its JSON as bytes (ui/player.py's component_data: encoded once per window, not per rerun).
  const data = typeof component.data === "string" ? JSON.parse(component.data)
    : (component.data instanceof ArrayBuffer || ArrayBuffer.isView(component.data))
      ? JSON.parse(new TextDecoder().decode(component.data)) : component.data;
  let p = PLAYERS[key];
  if (!p) {
    p = PLAYERS[key] = { step: null, playing: false, speed: 10, timer: null, lastCommitted: null, commitTimer: null };
  }
  p.data = data;
  p.runs = data.runs.map(prepare);
  p.setStateValue = setStateValue;
  p.maxStep = Math.max(...data.runs.map((r) => r.num_steps)) - 1;
  // A new scenario (another preset, a knob moved) starts where the link says; a new window of the same runs
  // keeps the step the player is on.
  const runsId = String(data.id).split("#")[0];
  if (p.step === null || p.runsId !== runsId) {
    p.step = initialStep(data, p.maxStep);
    p.runsId = runsId;
    p.playOrigin = null;
  }
  p.step = Math.max(0, Math.min(p.step, p.maxStep));

  // (the root also holds the component's <style>: only our own box is replaced)
  for (const old of parentElement.querySelectorAll(".player")) old.remove();  // (":scope" matches nothing in a shadow root)
  const box = el("div", { class: "player", "data-testid": "step-player" });
  parentElement.append(box);
  p.ui = buildControls(p, box);
  p.explain = el("div", { class: "runs" });
  box.append(p.explain);
  render(p);
  if (p.playing) startTimer(p, true);  // (the same play goes on: its clock is kept across Streamlit's re-mounts)
  const watcher = askForDetailWhenSeen(p, box);
  // Page-wide listeners once per player, whatever the order of Streamlit's re-mounts and clean-ups: each acts on
  // the player's latest mount, and only while one is mounted.
  const mount = (p.mount = (p.mount || 0) + 1);
  p.mounted = true;
  if (!p.listening) {
    p.listening = true;
    document.addEventListener("keydown", (ev) => { if (p.mounted) keyHandler(p, ev); });
    setInterval(() => { if (p.mounted) drawCursors(p); }, 700);
    window.addEventListener("resize", () => { if (p.mounted) drawCursors(p); });
  }
  return () => {
    watcher?.disconnect();
    if (p.mount !== mount) return;  // a newer mount took over: leave it playing
    p.mounted = false;
    stopTimer(p, false);
  };
}

// The waiting queue's order and the block map cost the server a re-run of every compared scenario: it makes
// them once the player has been on screen for a while (or is used), not for every slider move elsewhere. The wait
// is long enough that the request rarely meets a click just after a page load: a fragment rerun still in flight
// when a click changes the page's layout can make Streamlit's frontend apply the fragment's delta to the new
// layout ("Bad delta path index") and blank the app.
function askForDetailWhenSeen(p, box) {
  if (p.data.detail) return null;
  let timer = null;
  const observer = new IntersectionObserver((entries) => {
    const seen = entries.some((e) => e.isIntersecting);
    clearTimeout(timer);
    if (seen) timer = setTimeout(() => askForDetail(p), SEEN_FOR_DETAIL_MS);
  }, { threshold: 0.15 });
  observer.observe(box);
  return { disconnect: () => { clearTimeout(timer); observer.disconnect(); } };
}

function askForDetail(p) {
  if (p.data.detail || p.detailAsked === p.data.runs_id) return;
  p.detailAsked = p.data.runs_id;
  p.setStateValue("detail", p.data.runs_id);
}

function initialStep(data, maxStep) {
  const raw = new URLSearchParams(window.location.search).get("step");
  const n = raw !== null && /^\d+$/.test(raw) ? parseInt(raw, 10) : NaN;
  if (Number.isFinite(n) && n <= maxStep) return n;
  return Math.min(data.default_step, maxStep);
}

function buildControls(p, box) {
  const bar = el("div", { class: "controls", role: "toolbar", "aria-label": "Step player" });
  const button = (id, text, title, fn) => {
    const b = el("button", { type: "button", "data-testid": id, title, "aria-label": title, text });
    b.addEventListener("click", fn);
    bar.append(b);
    return b;
  };
  button("player-back10", "−10", "Back 10 steps (Shift+←)", () => moveTo(p, p.step - 10));
  button("player-back", "−1", "Back 1 step (←)", () => moveTo(p, p.step - 1));
  const play = button("player-play", "▶ Play", "Play / pause (space)", () => togglePlay(p));
  button("player-fwd", "+1", "Forward 1 step (→)", () => moveTo(p, p.step + 1));
  button("player-fwd10", "+10", "Forward 10 steps (Shift+→)", () => moveTo(p, p.step + 10));
  button("player-prev-event", "⇤ event", "Previous decision: admit, preempt, swap, resume, abort, finish, reject",
         () => jump(p, -1));
  button("player-next-event", "event ⇥", "Next decision: admit, preempt, swap, resume, abort, finish, reject",
         () => jump(p, 1));
  const speed = el("select", { "data-testid": "player-speed", title: "Playing speed", "aria-label": "Playing speed" });
  for (const s of SPEEDS) speed.append(el("option", { value: String(s), text: `${s} steps/s` }));
  speed.value = String(p.speed);
  speed.addEventListener("change", () => {
    p.speed = parseInt(speed.value, 10);
    if (p.playing) { stopTimer(p, false); startTimer(p); }
  });
  bar.append(speed);
  const label = el("label", { class: "step-label" }, "Step ");
  const input = el("input", { type: "number", min: "0", max: String(p.maxStep), "data-testid": "player-step",
                              "aria-label": "Engine step" });
  input.addEventListener("change", () => moveTo(p, parseInt(input.value, 10) || 0));
  label.append(input, el("span", { class: "of", text: ` of ${fmt(p.maxStep)}` }));
  bar.append(label);
  const slider = el("input", { type: "range", min: "0", max: String(p.maxStep), step: "1",
                               "data-testid": "player-slider", "aria-label": "Engine step" });
  slider.addEventListener("input", () => moveTo(p, parseInt(slider.value, 10)));
  box.append(bar, slider);
  return { play, input, slider };
}

function keyHandler(p, ev) {
  const t = ev.target;
  const tag = t && t.tagName ? t.tagName.toLowerCase() : "";
  // (nor on a slider or in a table: their arrow keys are their own)
  if (["input", "textarea", "select"].includes(tag) || (t && (t.isContentEditable || t.closest?.('[role="slider"], [data-testid="stSlider"], [data-testid="stDataFrame"], [role="grid"]')))) {
    return;
  }
  if (ev.key === "ArrowRight" || ev.key === "ArrowLeft") {
    const by = (ev.shiftKey ? 10 : 1) * (ev.key === "ArrowRight" ? 1 : -1);
    moveTo(p, p.step + by);
    ev.preventDefault();
  } else if (ev.key === " " && !(tag === "button")) {
    togglePlay(p);
    ev.preventDefault();
  }
}

function togglePlay(p) {
  if (p.playing) stopTimer(p, true);
  else {
    if (p.step >= p.maxStep) p.step = 0;
    p.playing = true;
    startTimer(p);
  }
  render(p);
}

// Playing follows the clock, not the count of ticks: each tick goes to the step the speed asks for by now, so a
// busy browser (a page of many charts on a loaded machine) draws fewer frames but keeps the speed chosen.
function startTimer(p, keepOrigin = false) {
  clearInterval(p.timer);
  // The play's origin: kept when the component is only re-mounted (a fragment rerun sends the step or a window),
  // which would otherwise drop up to a step and the re-mount's time each time, ~3% of a long play.
  if (!keepOrigin || !p.playOrigin) p.playOrigin = { step: p.step, ms: performance.now() };
  const { step: fromStep, ms: fromMs } = p.playOrigin;
  p.timer = setInterval(() => {
    if (p.step >= p.maxStep) { stopTimer(p, true); render(p); return; }
    const due = fromStep + Math.floor(((performance.now() - fromMs) * p.speed) / 1000);
    if (due > p.step) moveTo(p, due, true);
  }, 1000 / p.speed);
}

function stopTimer(p, commit) {
  clearInterval(p.timer);
  p.timer = null;
  if (commit) { p.playing = false; scheduleCommit(p, COMMIT_AFTER_MS); }
}

function jump(p, direction) {
  const all = new Set();
  for (const r of p.runs) for (const s of r.jumps) all.add(s);
  const steps = [...all].sort((a, b) => a - b);
  const target = direction > 0 ? steps.find((s) => s > p.step) : [...steps].reverse().find((s) => s < p.step);
  if (target !== undefined) moveTo(p, target);
}

function moveTo(p, step, fromTimer = false) {
  askForDetail(p);
  p.step = Math.max(0, Math.min(Number.isFinite(step) ? step : 0, p.maxStep));
  if (p.playing && !fromTimer) startTimer(p);  // (a step or jump while playing: play on from there)
  render(p);
  const outside = p.runs.some((r) => p.step < r.num_steps && (p.step < r.first || p.step >= r.end));
  if (outside) commit(p);
  else scheduleCommit(p, fromTimer ? COMMIT_WHILE_PLAYING_MS : COMMIT_AFTER_MS, fromTimer);
}

function scheduleCommit(p, delay, onlyIfIdle = false) {
  if (onlyIfIdle && p.commitTimer) return;
  clearTimeout(p.commitTimer);
  p.commitTimer = setTimeout(() => commit(p), delay);
}

function commit(p) {
  clearTimeout(p.commitTimer);
  p.commitTimer = null;
  if (p.lastCommitted === p.step) return;
  p.lastCommitted = p.step;
  p.setStateValue("step", p.step);
}

// ---- drawing ------------------------------------------------------------------------------------------------
function render(p) {
  const { play, input, slider } = p.ui;
  play.textContent = p.playing ? "❚❚ Pause" : "▶ Play";
  play.setAttribute("aria-pressed", String(p.playing));
  if (document.activeElement !== input) input.value = String(p.step);
  slider.value = String(p.step);
  p.explain.replaceChildren(...p.runs.map((r) => explainRun(p, r)));
  p.explain.setAttribute("data-step", String(p.step));
  drawCursors(p);
}

function explainRun(p, r) {
  const col = el("section", { class: "run", "data-run": r.label });
  col.append(el("h4", { text: r.label }));
  const step = p.step;
  if (step >= r.num_steps) {
    col.append(el("p", { class: "muted", text: `Every request had ended by step ${fmt(r.num_steps - 1)}.` }));
    return col;
  }
  const i = step - r.first;
  if (i < 0 || i >= r.n) {
    col.append(el("p", { class: "muted", text: "Loading this part of the run…" }));
    return col;
  }
  const t0 = r.x_ms[i], t1 = r.x_ms[i + 1];
  col.append(el("p", { class: "when", "data-testid": "player-when",
    text: `Step ${fmt(step)} · ${fmtMs(t0)} → ${fmtMs(t1)} ms (${fmtMs(r.step_ms[i])} ms long)` }));
  // KV pool
  const used = r.counts.used[i], total = r.num_blocks, freeAfter = r.counts.free_after[i];
  const bar = el("div", { class: "kvbar", title: `${fmt(used)} of ${fmt(total)} blocks in use during the step` });
  bar.append(el("div", { class: "kvfill", style: `width:${Math.min(100, (100 * used) / Math.max(total, 1))}%` }));
  col.append(el("div", { class: "kv", "data-testid": "player-kv" }, bar,
    el("span", { text: `KV pool: ${fmt(used)} of ${fmt(total)} blocks in use during the step · ${fmt(freeAfter)} free after it` })));
  // running batch
  const batch = r.batchAt[i], idle = r.idleAt[i];
  const nRun = batch.length / 3 + idle.length;
  col.append(el("h5", { text: `Running batch: ${fmt(nRun)} request${nRun === 1 ? "" : "s"}, ` +
    `${fmt(r.counts.prefill[i])} prefill + ${fmt(r.counts.decode[i])} decode tokens` }));
  const table = el("table", { class: "batch", "data-testid": "player-batch" });
  if (nRun) table.append(el("tr", { class: "head" }, el("th", { text: "request" }),
    el("th", { class: "num", text: "tokens" }), el("th", { text: "what" })));
  // Past MAX_BATCH_ROWS, the rows that do something other than decode one token come first (a prefill chunk is
  // the news of a step); the rest are counted.
  const rows = [];
  for (let j = 0; j < batch.length; j += 3) rows.push([batch[j], batch[j + 1], batch[j + 2]]);
  const plain = ([, tokens, kind]) => kind === 2 && tokens === 1;
  const shownRows = rows.length + idle.length <= MAX_BATCH_ROWS ? rows
    : [...rows.filter((x) => !plain(x)), ...rows.filter(plain)].slice(0, MAX_BATCH_ROWS);
  const keep = new Set(shownRows.map(([row]) => row));
  let shown = 0;
  for (const [row, tokens, kind] of rows) {
    if (!keep.has(row)) continue;
    shown++;
    table.append(el("tr", {}, el("td", { class: "id", text: r.ids[row] }), el("td", { class: "num", text: fmt(tokens) }),
      el("td", { text: p.data.sched_words[String(kind)] })));
  }
  for (const row of idle) {
    if (shown >= MAX_BATCH_ROWS) break;
    shown++;
    const why = r.counts.preempted[i] ? "no tokens: scheduling stopped at a preemption" : "no tokens: the step's token budget ran out";
    table.append(el("tr", { class: "idle" }, el("td", { class: "id", text: r.ids[row] }), el("td", { class: "num", text: "0" }),
      el("td", { text: why })));
  }
  if (nRun > shown) {
    const hiddenAllDecode = rows.filter((x) => !keep.has(x[0])).every(plain);
    table.append(el("tr", {}, el("td", { colspan: "3", class: "muted",
      text: `… and ${fmt(nRun - shown)} more${hiddenAllDecode ? ", each decoding 1 token" : ""}` })));
  }
  if (nRun === 0) table.append(el("tr", {}, el("td", { class: "muted", text: "Nothing ran this step." })));
  col.append(table);
  // queues
  const waiting = r.waitingAt ? r.waitingAt[i] : null, nWait = r.counts.waiting[i];
  const q = el("p", { class: "queue", "data-testid": "player-waiting" },
    el("b", { text: `Waiting queue after the step: ${fmt(nWait)}` }),
    nWait ? (waiting ? " (head first): " : " (listing them…)") : "");
  if (nWait && waiting) {
    q.append(waiting.slice(0, MAX_QUEUE_IDS).map((row) => r.ids[row]).join(", "));
    if (nWait > Math.min(waiting.length, MAX_QUEUE_IDS)) q.append(` … and ${fmt(nWait - Math.min(waiting.length, MAX_QUEUE_IDS))} more`);
  }
  col.append(q);
  const swapped = r.swappedAt ? r.swappedAt[i] : [];
  if (!r.swappedAt && r.counts.swapped[i]) col.append(el("p", { class: "queue" }, el("b", { text: `Swapped to CPU: ${fmt(r.counts.swapped[i])}` })));
  if (swapped.length) {
    col.append(el("p", { class: "queue" }, el("b", { text: "Swapped to CPU: " }), swapped.map((row) => r.ids[row]).join(", ")));
  }
  // decisions
  col.append(el("h5", { text: "Decisions this step" }));
  const list = el("ul", { class: "why", "data-testid": "player-why" });
  const arrived = r.arrived[String(i)];
  if (arrived) list.append(el("li", {}, el("span", { class: "label", text: "arrived: " }), arrived.map((row) => r.ids[row]).join(", ")));
  const evs = r.eventsAt[i];
  for (let j = 0; j < evs.length; j += 4) {
    const [row, labelIdx, whyIdx, kindCode] = [evs[j], evs[j + 1], evs[j + 2], evs[j + 3]];
    const label = r.texts[labelIdx];
    const kind = p.data.kinds[kindCode];
    list.append(el("li", { class: `ev-${kind}` }, el("b", { text: r.ids[row] }), label ? ` ${label}: ` : " ", r.texts[whyIdx]));
  }
  if (!list.children.length) {
    list.append(el("li", { class: "muted", text: nRun ? "Nothing changed: everybody kept running." : "Nothing to decide: no request was waiting or running." }));
  }
  col.append(list);
  if (r.blocks) col.append(blockMap(p, r, i));
  else if (p.data.block_map) col.append(el("p", { class: "muted", text: "Block map: loading…" }));
  return col;
}

function blockMap(p, r, i) {
  const codes = codesAt(r, i);
  const before = i > 0 ? codesAt(r, i - 1) : null;
  const victims = new Set();
  const evs = r.eventsAt[i];
  for (let j = 0; j < evs.length; j += 4) if (["preempt", "swap_out"].includes(p.data.kinds[evs[j + 3]])) victims.add(evs[j]);
  const n = codes.length;
  const per = Math.max(1, Math.ceil(n / MAX_MAP_CELLS));
  const cells = Math.ceil(n / per);
  const cols = Math.max(8, Math.ceil(Math.sqrt(cells * 2)));
  const rows = Math.ceil(cells / cols);
  const wrap = el("div", { class: "blockmap", "data-testid": "player-block-map" });
  const canvas = el("canvas", { role: "img" });
  const cssW = 460, cell = Math.max(3, Math.floor(cssW / cols));
  const dpr = window.devicePixelRatio || 1;
  canvas.width = cols * cell * dpr;
  canvas.height = rows * cell * dpr;
  canvas.style.width = "100%";  // (as wide as the column allows, square cells kept)
  canvas.style.maxWidth = `${cols * cell}px`;
  canvas.style.aspectRatio = `${cols} / ${rows}`;
  const ctx = canvas.getContext("2d");
  ctx.scale(dpr, dpr);
  const pal = p.data.palette;
  let freedCount = 0;
  for (let c = 0; c < cells; c++) {
    // the cell's code: its blocks' most common (a request beats free on a tie)
    const tally = new Map();
    let freed = false;
    for (let b = c * per; b < Math.min(n, (c + 1) * per); b++) {
      tally.set(codes[b], (tally.get(codes[b]) || 0) + 1);
      if (before && codes[b] < 0 && victims.has(before[b])) freed = true;
    }
    let code = -1, best = -1;
    for (const [k, v] of tally) if (v > best || (v === best && k > code)) { code = k; best = v; }
    const x = (c % cols) * cell, y = Math.floor(c / cols) * cell;
    const gap = cell >= 8 ? 1 : 0;
    ctx.fillStyle = code >= 0 ? pal.requests[code % pal.requests.length] : freed ? pal.freed : code === -2 ? pal.cached : pal.free;
    if (freed && code < 0) freedCount++;
    ctx.fillRect(x + gap, y + gap, cell - 2 * gap, cell - 2 * gap);
    ctx.strokeStyle = "#bbbbbb";
    ctx.lineWidth = 0.5;
    ctx.strokeRect(x + gap, y + gap, cell - 2 * gap, cell - 2 * gap);
    if (freed && code < 0 && cell >= 8) {
      ctx.strokeStyle = "#b03a10"; ctx.lineWidth = 1.2;
      ctx.beginPath(); ctx.moveTo(x + 3, y + 3); ctx.lineTo(x + cell - 3, y + cell - 3);
      ctx.moveTo(x + cell - 3, y + 3); ctx.lineTo(x + 3, y + cell - 3); ctx.stroke();
    } else if (code >= 0 && cell >= 24 && per === 1) {
      ctx.fillStyle = "#ffffff"; ctx.font = `${Math.min(12, cell / 2.5)}px sans-serif`;
      ctx.textAlign = "center"; ctx.textBaseline = "middle";
      ctx.fillText(String(r.ids[code]).slice(0, 4), x + cell / 2, y + cell / 2);
    }
  }
  const inUse = Array.from(codes).filter((c) => c >= 0).length;
  canvas.setAttribute("aria-label", `KV block map at step ${p.step}: ${inUse} of ${n} blocks held`);
  const unit = per === 1 ? `one KV block (${r.block_size} tokens)` : `${per} KV blocks`;
  wrap.append(el("p", { class: "muted", text: `Block map during the step: each square is ${unit}, coloured by the ` +
    `request holding it; white: free; grey: free but still caching a prefix` +
    (freedCount ? `; pale red with a cross: given up by a preemption in this step.` : ".") }), canvas);
  return wrap;
}

// One cursor on every chart that asks for it: a plotly figure whose layout.meta.cursor = {runs: [labels], unit}.
function drawCursors(p) {
  for (const gd of document.querySelectorAll(".js-plotly-plot")) {
    const meta = gd.layout && gd.layout.meta && gd.layout.meta.cursor;
    const fl = gd._fullLayout;
    if (!meta || !fl || !fl.xaxis || !fl._size) continue;
    // A run's x axis (side-by-side panels: its own) and the span of its panels: stacked panels that share it
    // (make_subplots' shared_xaxes: the upper axes "match" the lowest) get one cursor through all of them.
    const yOf = (ax) => (ax && ax.anchor && ax.anchor !== "free" ? fl[`yaxis${ax.anchor.slice(1)}`] : null);
    const axisOf = (k) => {
      const id = meta.axes ? meta.axes[k] : "x";
      const ax = fl[`xaxis${id.slice(1)}`];
      if (!ax) return null;
      const group = meta.axes ? [ax] : Object.keys(fl).filter((name) => /^xaxis\d*$/.test(name)).map((name) => fl[name])
        .filter((other) => other === ax || other.matches === ax._id
          || (ax.matches && (other._id === ax.matches || other.matches === ax.matches)));
      const ys = group.map(yOf).filter(Boolean);
      if (!ys.length) return { ax, top: fl._size.t, height: fl._size.h };
      const top = Math.min(...ys.map((ya) => ya._offset));
      return { ax, top, height: Math.max(...ys.map((ya) => ya._offset + ya._length)) - top };
    };
    let layer = gd.querySelector(":scope > .sl-cursor-layer");
    if (!layer) {
      layer = document.createElement("div");
      layer.className = "sl-cursor-layer";
      layer.setAttribute("data-testid", "player-cursor-layer");
      layer.style.cssText = "position:absolute;left:0;top:0;width:100%;height:100%;pointer-events:none;z-index:5;";
      if (getComputedStyle(gd).position === "static") gd.style.position = "relative";
      gd.append(layer);
    }
    const lines = [];
    meta.runs.forEach((label, k) => {
      const r = p.runs.find((run) => run.label === label);
      const where = axisOf(k);
      if (!r || !where || p.step >= r.num_steps) return;
      const { ax, top, height } = where;
      const i = p.step - r.first;
      if (i < 0 || i >= r.n) return;
      const x0 = meta.unit === "ms" ? r.x_ms[i] : p.step;
      const x1 = meta.unit === "ms" ? r.x_ms[i + 1] : p.step + 1;
      const px0 = ax._offset + ax.l2p(x0), px1 = ax._offset + ax.l2p(x1);
      if (!(px1 >= ax._offset && px0 <= ax._offset + ax._length)) return;
      const w = Math.max(2, px1 - px0);
      const line = document.createElement("div");
      line.className = "sl-cursor";
      line.setAttribute("data-run", label);
      line.setAttribute("data-x", ((px0 + px1) / 2).toFixed(1));
      const shared = meta.runs.length > 1 && !meta.axes;  // several runs' cursors on one axis: dashed after the first
      line.style.cssText = `position:absolute;top:${top}px;height:${height}px;left:${(px0 + px1) / 2 - w / 2}px;` +
        `width:${w}px;background:rgba(0,0,0,0.18);border-left:2px ${shared && k ? "dashed" : "solid"} rgba(0,0,0,0.8);`;
      // On a time axis in ms the runs' cursors part (one run's step 100 is not another's): each is named, inside
      // the plot, one under the other (above it they would cover the legend). On an axis of steps they coincide.
      if (shared && meta.unit === "ms") {
        const tag = document.createElement("span");
        tag.textContent = label;
        tag.style.cssText = `position:absolute;top:${0.2 + 1.3 * k}em;left:4px;font:11px sans-serif;white-space:nowrap;` +
          "background:rgba(255,255,255,0.85);";
        line.append(tag);
      }
      lines.push(line);
    });
    layer.replaceChildren(...lines);
    layer.setAttribute("data-step", String(p.step));
  }
}
