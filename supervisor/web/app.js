// pi-workflows ui: keeps the server-rendered pages live from the view stream's
// Server-Sent Events. Data is only ever put in the page as text (never as HTML).
"use strict";

function applyOps(doc, ops) {
  for (const op of ops) {
    const path = op.path;
    if (path.length === 0) {
      if (op.op === "set") doc = op.value;
      else if (op.op === "append") doc = doc.concat(op.values);
      continue;
    }
    let parent = doc;
    for (let i = 0; i < path.length - 1; i++) parent = parent[path[i]];
    const last = path[path.length - 1];
    if (op.op === "set") parent[last] = op.value;
    else if (op.op === "del") {
      if (Array.isArray(parent)) parent.splice(last, 1); else delete parent[last];
    } else if (op.op === "append") parent[last] = (parent[last] || []).concat(op.values);
  }
  return doc;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    node.setAttribute(k, v === true ? "" : String(v));
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function ms(v) {
  if (typeof v !== "number") return "";
  const s = v / 1000;
  if (s < 60) return s.toFixed(1) + "s";
  return Math.floor(s / 60) + "m" + String(Math.floor(s % 60)).padStart(2, "0") + "s";
}

function pretty(v) {
  try { return JSON.stringify(v, null, 2); } catch (e) { return String(v); }
}

const live = document.getElementById("live");
function setLive(text, cls) { if (live) { live.textContent = text; live.className = "live " + cls; } }

// One stream: a snapshot, then patches rev+1 each; a gap (or an error) reconnects,
// and the reconnection's snapshot replaces the document.
function follow(url, render) {
  let doc = null, rev = -1, source = null;
  function open() {
    source = new EventSource(url);
    source.addEventListener("snapshot", (e) => {
      const data = JSON.parse(e.data);
      doc = data.doc; rev = data.rev; render(doc); setLive("live", "on");
    });
    source.addEventListener("patch", (e) => {
      const data = JSON.parse(e.data);
      if (doc === null || data.rev !== rev + 1) { source.close(); setLive("resync", "off"); open(); return; }
      doc = applyOps(doc, data.ops); rev = data.rev; render(doc);
    });
    source.onerror = () => setLive("reconnecting", "off");
  }
  open();
  return () => doc;
}

// --- the run list ---

function runRow(run) {
  const progress = run.progress && run.progress.message ? " · " + run.progress.message : "";
  const link = el("a", { href: "/runs/" + encodeURIComponent(run.runId) }, (run.depth ? "↳ " : "") + run.runId);
  return el("tr", { "data-run": run.runId, class: "depth-" + (run.depth ? 1 : 0) },
    el("td", { class: "id" }, link), el("td", {}, run.workflow || ""), el("td", {}, run.title || ""),
    el("td", {}, el("span", { class: "state state-" + (run.state || "") }, run.state || "")),
    el("td", {}, (run.currentNode || "") + progress),
    el("td", { class: "num", "data-elapsed": run.elapsedMs ?? "", "data-ticks": run.finishedAt == null && run.elapsedMs != null ? "1" : null }, ms(run.elapsedMs)));
}

// A running run's elapsed time goes on between patches: counted here from the
// document's own time (`at`), on this machine's clock as the server's is.
let listAt = 0;
setInterval(() => {
  for (const cell of document.querySelectorAll("td[data-ticks]")) {
    cell.textContent = ms(Number(cell.dataset.elapsed) + (Date.now() - listAt));
  }
}, 1000);

function renderList(doc) {
  listAt = doc.at || Date.now();
  const body = document.getElementById("runs");
  body.replaceChildren(...(doc.runs || []).map(runRow));
  document.getElementById("count").textContent = String((doc.runs || []).length);
  document.getElementById("more").textContent = doc.truncated ? "; more match (narrow the filters)" : "";
}

// --- controllers ---

function resourceRow(res) {
  const ready = res.ready || "unknown";
  const word = ready === "true" ? "completed" : ready === "false" ? "failed" : "pending";
  const kids = el("td", {});
  for (const c of res.children || []) kids.append(el("a", { href: "/runs/" + encodeURIComponent(c.runId) }, c.runId), " ");
  return el("tr", { "data-resource": res.controller + "/" + res.key },
    el("td", {}, res.controller), el("td", {}, res.key),
    el("td", {}, el("span", { class: "state state-" + word }, "Ready=" + ready), res.deleting ? " deleting" : ""),
    el("td", {}, res.reason || ""),
    el("td", { class: "num" }, String(res.generation ?? "") + " / " + (res.observedGeneration ?? "-")), kids);
}

function renderControllers(doc) {
  document.getElementById("resources").replaceChildren(...(doc.resources || []).map(resourceRow));
  document.getElementById("not-ready").textContent = String(doc.notReady ?? 0);
  document.getElementById("resources-total").textContent = String((doc.resources || []).length);
}

// --- the run page ---

let selected = null;
let current = null;
const csrfMeta = document.querySelector('meta[name="csrf-token"]');

function renderRun(doc) {
  current = doc;
  const run = doc.run || {};
  const state = document.getElementById("run-state");
  state.textContent = run.state || ""; state.className = "state state-" + (run.state || "");
  document.getElementById("run-detail").textContent = run.statusDetail || (run.progress && run.progress.message) || "";
  const kinds = {};
  for (const n of ((doc.graph || {}).nodes || [])) kinds[n.id] = n.kind;
  for (const g of document.querySelectorAll("#graph [data-node]")) {
    const id = g.getAttribute("data-node");
    const word = (doc.nodes || {})[id] || "pending";
    g.setAttribute("class", "node state-" + word + (id === selected ? " selected" : ""));
    const label = g.querySelector("text.kind");
    if (label && kinds[id]) label.textContent = kinds[id] + " · " + word;
  }
  const steps = document.getElementById("steps");
  steps.replaceChildren(...(doc.steps || []).map((s) => el("tr", { "data-node": s.nodeId },
    el("td", {}, s.step ?? ""), el("td", {}, s.nodeId), el("td", {}, s.kind || ""),
    el("td", {}, el("span", { class: "state state-" + s.outcome }, s.outcome || "")), el("td", { class: "num" }, ms(s.durationMs)))));
  const trace = document.getElementById("trace");
  trace.replaceChildren(...(doc.trace || []).map((ev) => el("li", {},
    el("code", {}, ev.type || ev.event || "event"), " ", ev.nodeId || ev.node || "")));
  const chat = document.getElementById("conversation");
  const transcript = doc.transcript || [];
  if (transcript.length) {  // Pi's own session file: both sides of the conversation
    chat.replaceChildren(...transcript.map((m) => el("div", { class: "msg " + m.role + (m.isError ? " error" : "") },
      el("span", { class: "who" }, m.role === "tool" ? "tool " + (m.tool || "") : m.role),
      m.text ? el("pre", {}, m.text) : null,
      ...(m.tools || []).map((t) => el("pre", { class: "tool-call" }, "→ " + t.name + " " + t.arguments)))));
  } else {  // no session file (yet): the capture of each attempt
    chat.replaceChildren(...(doc.conversation || []).map((r) => el("div", { class: "msg " + (r.kind || "") },
      el("span", { class: "who" }, r.kind === "text" ? (r.role || "agent") : (r.tool || r.name || r.kind)),
      el("pre", {}, r.text ?? pretty(r.args ?? r.result ?? "")))));
  }
  renderInspector();
  renderActions(doc);
}

function renderInspector() {
  const body = document.getElementById("inspector-body");
  if (!current || !selected) return;
  document.getElementById("inspector-hint").textContent = "node " + selected;
  const steps = (current.steps || []).filter((s) => s.nodeId === selected);
  const parts = [];
  for (const s of steps) {
    parts.push(el("h3", {}, `attempt ${s.step ?? ""}: ${s.outcome || ""}`));
    if (s.error || s.errorCode) parts.push(el("pre", { class: "error" }, [s.errorCode, s.error].filter(Boolean).join(": ")));
    if (s.output !== undefined && s.output !== null) parts.push(el("h4", {}, "output"), el("pre", { class: "json" }, pretty(s.output)));
    const out = (current.output || []).filter((r) => r.attemptId === s.attemptId);
    const text = out.length ? out.map((r) => r.text).join("") : [s.stdout, s.stderr].filter(Boolean).join("");
    if (text) parts.push(el("h4", {}, "shell output"), el("pre", { class: "shell" }, text));
  }
  if (!steps.length) parts.push(el("p", { class: "muted" }, "not run yet"));
  body.replaceChildren(...parts);
}

function renderActions(doc) {
  const box = document.getElementById("actions");
  if (!box) return;
  const run = doc.run || {};
  const finished = ["completed", "failed", "cancelled", "timed_out"].includes(run.runStatus);
  const waiting = run.runStatus === "waiting" && !run.continuedBy;
  const answer = document.getElementById("answer");
  answer.hidden = !waiting;
  const request = run.request || null;
  document.getElementById("question").textContent = request ? (request.question || "") : (run.waitingOn || "");
  const choices = document.getElementById("choices");
  const list = request && Array.isArray(request.choices) ? request.choices : [];
  choices.replaceChildren(...list.map((c) => {
    const b = el("button", { type: "button", "data-action": "answer", "data-choice": c.label }, c.label);
    b.addEventListener("click", () => act("answer", { choice: c.label, text: document.getElementById("answer-input").value }));
    return b;
  }));
  document.getElementById("cancel").hidden = finished || (waiting && false);
  // Parked (paused, or given back by a host), or asked to pause and not there yet:
  // what `resume` frees; the server says why when it cannot.
  document.getElementById("resume").hidden = !(run.queueState === "parked" || run.paused || run.pauseRequested);
  document.getElementById("fork").hidden = !finished;
}

async function act(verb, fields) {
  const out = document.getElementById("action-result");
  out.textContent = "…";
  const rid = JSON.parse(document.getElementById("run-id").textContent);
  try {
    const r = await fetch("/runs/" + encodeURIComponent(rid) + "/" + verb, {
      method: "POST", credentials: "same-origin",
      headers: { "content-type": "application/json", "x-csrf-token": csrfMeta.content },
      body: JSON.stringify(fields || {}),
    });
    const text = await r.text();
    if (!r.ok) { out.textContent = text.trim(); out.className = "refused"; return; }
    const data = JSON.parse(text);
    out.className = "ok";
    out.replaceChildren(data.message || "done", " ");
    if (data.runId && data.runId !== rid) out.append(el("a", { href: "/runs/" + encodeURIComponent(data.runId), id: "action-link" }, data.runId));
  } catch (e) { out.textContent = String(e); out.className = "refused"; }
}

function init() {
  const page = document.body.dataset.page;
  if (page === "list") {
    follow("/events/runs" + location.search, renderList);
  } else if (page === "controllers") {
    follow("/events/controllers", renderControllers);
  } else if (page === "run") {
    const rid = JSON.parse(document.getElementById("run-id").textContent);
    document.getElementById("graph").addEventListener("click", (e) => {
      const g = e.target.closest("[data-node]");
      if (!g) return;
      selected = g.getAttribute("data-node");
      if (current) renderRun(current);
    });
    if (csrfMeta) {
      for (const verb of ["cancel", "resume"]) document.getElementById(verb).addEventListener("click", () => act(verb, {}));
      document.getElementById("fork").addEventListener("click", () => act("fork", selected ? { from: selected } : {}));
      document.getElementById("answer-text").addEventListener("submit", (e) => {
        e.preventDefault();
        act("answer", { text: document.getElementById("answer-input").value });
      });
    }
    follow("/events/runs/" + encodeURIComponent(rid), renderRun);
  }
}

init();
