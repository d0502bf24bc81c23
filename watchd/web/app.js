// The live page of watchd serve: every chat with a run, its state, its
// latest status and a question waiting for an answer. The list comes from
// GET chats (read again every few seconds); the runs still going are
// followed live with an event stream on chats/C/events?job=J, which replays
// the run's recent lines and then sends each new one. The one thing it
// writes is an answer to a run's open question (POST chats/C/answer, by
// the rules of `spool answer`: the first answer wins). The address
// #chat=C shows that chat alone: the one the chat's tool points its
// person to when the dialog is gone. Over TCP, watchd asks for its
// token: the address watchd serve printed carries it in its fragment
// (#token=T), which no browser sends to a server; the page keeps it in
// this tab's sessionStorage for this origin, takes it out of the address,
// and sends it as
// "Authorization: Bearer T" with each request (token(), authed()). No
// cookie: a browser would send one to every port of the host. So the
// streams are read with fetch, which can send the header, not with an
// EventSource, which cannot. Text is only ever set with textContent,
// never parsed as HTML: statuses are whatever a job printed.
"use strict";

// A browser opens at most 6 HTTP/1.1 connections to one host, and an
// event stream holds one for as long as the run lasts: follow at most 4
// runs live, so that the list and the page's files still load. The other
// runs are updated by the list's refresh.
const MAX_STREAMS = 4;
const MAX_LINES = 50;
const REFRESH_MS = 3000;

const TOKEN_KEY = "watchd-token";
// A stream line longer than this ends the stream: watchd's are far shorter.
const MAX_STREAM_BUFFER = 4 << 20;

const rows = new Map(); // chat -> row
let memToken = ""; // where sessionStorage is refused (a private window's policy)

// takeToken moves a token from the address (#token=T, beside #chat=C or
// alone) into this tab's storage, and leaves the address without it: out
// of the address bar and of any link copied from it. sessionStorage, not
// localStorage: what a tab keeps ends with the tab, so a server that takes
// this port later (another user's, once watchd has stopped) finds no
// token to read. A token watchd refuses never replaces one it takes: any
// page may open this address with a #token= of its choosing.
async function takeToken() {
  const params = hashParams();
  if (!params.has("token")) return;
  const t = params.get("token");
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : ""));
  if (token()) {
    try {
      const resp = await fetch("chats", { headers: { Authorization: "Bearer " + t }, cache: "no-store" });
      if (!resp.ok) return;
    } catch (e) {
      return;
    }
  }
  memToken = t;
  try { sessionStorage.setItem(TOKEN_KEY, t); } catch (e) { /* memToken serves */ }
}

// hashParams reads the address's fragment as key=value pairs, split at
// "&" or at a second "#" (the printed address with "#chat=C" pasted after).
function hashParams() {
  return new URLSearchParams(location.hash.replace(/^#/, "").replace(/#/g, "&"));
}

function token() {
  try { return sessionStorage.getItem(TOKEN_KEY) || memToken; } catch (e) { return memToken; }
}

// authed returns fetch's options with the token's header added, when the
// page has a token (a unix socket behind a proxy, or --no-token, needs none).
function authed(opts) {
  const t = token();
  opts.headers = Object.assign({}, opts.headers || {});
  if (t) opts.headers["Authorization"] = "Bearer " + t;
  return opts;
}
const tbody = document.getElementById("chats");

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// setConn says how the page reaches watchd: "up", "down" (unreachable),
// or "auth" (watchd asks for its token: the page was opened without the
// address watchd serve printed, or the token was rotated since).
function setConn(state) {
  const c = document.getElementById("conn");
  c.dataset.conn = state;
  c.textContent = {
    up: "connected",
    down: "watchd unreachable, retrying…",
    auth: "not signed in: open the address watchd serve printed (…/#token=…), or ask for the new one if the token was rotated",
  }[state];
}

// stamp returns a document's time as seconds since the epoch, or 0 for
// anything that is not a plausible one (a string, NaN, 1e300): a crafted
// document must not throw in the page (a Date past year 275760 does, in
// toISOString) and take the other chats' rows down with it.
function stamp(x) {
  return typeof x === "number" && Number.isFinite(x) && x > 0 && x < 1e11 ? x : 0;
}

function text(x) {
  return typeof x === "string" ? x : "";
}

// The spool's id rule: a chat's, a job's and a question's id.
const ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

// shq quotes a word for a POSIX shell, so that a command line shown to a
// person does what it says when pasted, whatever the word holds: as it is
// when no shell reads any of its characters specially, else in single
// quotes. The ids are checked by watchd already; this is the second lock.
function shq(s) {
  s = String(s);
  return /^[A-Za-z0-9._\/:=@%+,-]+$/.test(s) ? s : "'" + s.replace(/'/g, "'\\''") + "'";
}

// answerLine is the command that answers q, for a person to paste: the
// question named only when its id is an id.
function answerLine(chat, q) {
  let line = "spool answer --chat " + shq(chat);
  if (q && typeof q.id === "string" && ID_RE.test(q.id)) line += " --question " + shq(q.id);
  return line + " TEXT";
}

function ago(updated) {
  updated = stamp(updated);
  if (!updated) return "";
  const s = Math.max(0, Math.round(Date.now() / 1000 - updated));
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.floor(s / 60) + " min ago";
  if (s < 86400) return Math.floor(s / 3600) + " h ago";
  return new Date(updated * 1000).toLocaleString();
}

function newRow(chat) {
  const r = { chat, job: "", updated: 0, done: false, stream: null, question: null, asking: false };
  r.tr = el("tr");
  r.tr.dataset.chat = chat;
  r.tdChat = el("td", "chat", chat);
  r.stateEl = el("span", "state", "");
  const tdState = el("td");
  tdState.append(r.stateEl);
  r.tdStatus = el("td", "status-cell");
  r.statusEl = el("div", "status", "");
  r.questionEl = el("div", "ask");
  r.questionEl.hidden = true;
  // The outcome of the page's own answer: outside the question's box,
  // which the run's answer event removes, often before the request
  // returns (the run takes an answer 10 to 50 ms after it is written).
  r.outcomeEl = el("div", "outcome", "");
  r.outcomeEl.hidden = true;
  r.details = el("details");
  r.details.append(el("summary", "", "recent lines"));
  r.linesEl = el("ol", "lines");
  r.details.append(r.linesEl);
  r.details.hidden = true;
  r.tdStatus.append(r.statusEl, r.questionEl, r.outcomeEl, r.details);
  r.tdJob = el("td", "job", "");
  r.tdUpdated = el("td", "updated", "");
  r.tr.append(r.tdChat, tdState, r.tdStatus, r.tdJob, r.tdUpdated);
  rows.set(chat, r);
  tbody.append(r.tr);
  return r;
}

function setState(r, state) {
  r.tr.dataset.state = state || "";
  r.stateEl.textContent = state || "?";
}

function setStatus(r, text, ended) {
  r.statusEl.textContent = text || "";
  r.statusEl.classList.toggle("end", !!ended);
}

// setOutcome says what became of the answer this page sent to question
// qid: result "sending", "ok" (taken) or "refused" (with the reason watchd
// gave, "already answered: TEXT" when another answer won), or hides it.
function setOutcome(r, qid, result, text) {
  r.outcomeEl.dataset.question = qid || "";
  r.outcomeEl.dataset.result = result || "";
  r.outcomeEl.textContent = text || "";
  r.outcomeEl.hidden = !result;
}

function setQuestion(r, q) {
  // The same question shown again (a refresh, the stream's replay) keeps
  // what the person is typing.
  if (q && r.question && q.id === r.question.id && q.id && !r.questionEl.hidden) return;
  // A new question: the outcome of an answer to another one is old news.
  if (q && r.outcomeEl.dataset.question !== text(q.id)) setOutcome(r, "", "", "");
  r.question = q || null;
  r.questionEl.replaceChildren();
  r.questionEl.hidden = !q;
  if (!q) return;
  const options = Array.isArray(q.options) ? q.options.filter(o => typeof o === "string") : [];
  r.questionEl.append(el("strong", "", "Question: "), el("span", "text", text(q.text)));
  if (options.length) {
    r.questionEl.append(el("span", "options", " [" + options.join(" / ") + "]"));
  }
  r.questionEl.append(answerForm(r, q, options));
  r.questionEl.append(el("code", "how", answerLine(r.chat, q)));
}

// answerForm is what answers q from the page: a button per option, or a
// text field (empty only where the question allows it). No <form>: the
// page's CSP allows no form submission; the answer is sent by fetch.
function answerForm(r, q, options) {
  const box = el("div", "answer");
  const said = el("span", "said", "");
  const qid = text(q.id);
  const label = qid ? "question " + qid + ": " : "";
  const send = async (answer, controls) => {
    controls.forEach(c => { c.disabled = true; });
    said.textContent = "";
    said.dataset.result = "";
    setOutcome(r, qid, "sending", label + "sending your answer: " + answer);
    try {
      const resp = await fetch("chats/" + encodeURIComponent(r.chat) + "/answer", authed({
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ question: qid, answer }),
        cache: "no-store",
      }));
      if (resp.ok) {
        let taken = answer;
        try { taken = text((await resp.json()).answer); } catch (e) { /* as sent */ }
        setOutcome(r, qid, "ok", label + "your answer was taken: " + taken);
        return;
      }
      if (resp.status === 401) setConn("auth");
      // watchd's one line, without what this row shows already.
      const why = (await resp.text()).trim().replace(/^watchd: /, "").replace("chat " + r.chat + ": ", "");
      setOutcome(r, qid, "refused", "your answer (" + answer + ") was not taken: " + why);
    } catch (e) {
      setOutcome(r, qid, "refused", label + "your answer was not sent: watchd unreachable");
    }
    controls.forEach(c => { c.disabled = false; });
  };
  if (options.length) {
    const buttons = options.map(o => el("button", "option", o));
    buttons.forEach((b, i) => b.addEventListener("click", () => send(options[i], buttons)));
    box.append(...buttons);
  } else {
    const input = el("input", "reply");
    input.type = "text";
    input.placeholder = q.allow_empty === true ? "your answer (may be empty)" : "your answer";
    const button = el("button", "send", "Answer");
    const go = () => {
      if (input.value.trim() === "" && q.allow_empty !== true) {
        said.textContent = "this question needs an answer";
        said.dataset.result = "refused";
        return;
      }
      send(input.value, [input, button]);
    };
    button.addEventListener("click", go);
    input.addEventListener("keydown", e => { if (e.key === "Enter") go(); });
    box.append(input, button);
  }
  box.append(said);
  return box;
}

// focus is the chat the address names (#chat=C), or "" for every chat.
function focusChat() {
  const c = hashParams().get("chat") || "";
  return ID_RE.test(c) ? c : "";
}

// applyFocus shows the focused chat's row alone, or every row.
function applyFocus() {
  const f = focusChat();
  const bar = document.getElementById("focus");
  bar.hidden = !f;
  document.getElementById("focus-chat").textContent = f;
  for (const [chat, r] of rows) r.tr.hidden = !!f && chat !== f;
  document.getElementById("focus-none").hidden = !f || rows.has(f);
}

function addLine(r, kind, text) {
  const li = el("li", kind, text);
  r.linesEl.append(li);
  while (r.linesEl.children.length > MAX_LINES) r.linesEl.firstChild.remove();
  r.details.hidden = false;
}

// newRun resets a row whose chat started another run (another job id).
function newRun(r, job) {
  closeStream(r);
  r.job = job;
  r.lastID = "";
  r.tdJob.textContent = job;
  r.linesEl.replaceChildren();
  r.details.hidden = true;
  setQuestion(r, null);
  setOutcome(r, "", "", "");
}

function closeStream(r) {
  if (r.stream) r.stream.close();
  r.stream = null;
  r.tr.dataset.live = "no";
}

// openStream follows r's run: GET chats/C/events?job=J read with fetch,
// its server-sent events parsed here (readEvents). A stream that ends
// before the run's end (watchd restarted, the network) is closed; the
// list's refresh opens it again, from the last event seen (Last-Event-ID).
function openStream(r) {
  const url = "chats/" + encodeURIComponent(r.chat) + "/events?job=" + encodeURIComponent(r.job);
  const ctl = new AbortController();
  const stream = { close: () => ctl.abort() };
  r.stream = stream;
  r.tr.dataset.live = "yes";
  r.details.open = true; // a run followed live shows its lines as they come
  const handlers = {
    status: m => { setStatus(r, m.text); addLine(r, "status", m.text); },
    note: m => addLine(r, "note", m.text),
    gap: m => addLine(r, "gap", m.text),
    question: m => {
      setState(r, "waiting");
      setQuestion(r, m.question || { id: "", text: m.text, options: [] });
      addLine(r, "question", m.text);
    },
    answer: m => {
      setState(r, "running");
      setQuestion(r, null);
      addLine(r, "answer", m.text);
    },
    end: m => {
      r.done = true;
      setState(r, m.state);
      setStatus(r, m.text, true);
      setQuestion(r, null);
      addLine(r, "end", m.text);
      closeStream(r);
      openStreams();
    },
  };
  const dispatch = (kind, data, id) => {
    if (r.stream !== stream) return; // a stream of an older run
    if (id) r.lastID = id;
    let m;
    try { m = JSON.parse(data); } catch (e) { return; }
    if (!m || typeof m !== "object" || !Object.hasOwn(handlers, kind)) return;
    try { handlers[kind](m); } catch (e) { console.warn("event", kind, e); }
  };
  const headers = { Accept: "text/event-stream" };
  if (r.lastID) headers["Last-Event-ID"] = r.lastID;
  fetch(url, authed({ headers, cache: "no-store", signal: ctl.signal }))
    .then(resp => {
      if (resp.status === 401) setConn("auth");
      if (!resp.ok || !resp.body) throw new Error("events: " + resp.status);
      return readEvents(resp.body.getReader(), dispatch);
    })
    .catch(() => {})
    .finally(() => { if (r.stream === stream) closeStream(r); });
}

// readEvents parses a text/event-stream (the lines event:, data:, id:, a
// blank line ending each event) and hands each event to dispatch.
async function readEvents(reader, dispatch) {
  const dec = new TextDecoder();
  let buf = "", kind = "", data = [], id = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    if (buf.length > MAX_STREAM_BUFFER) throw new Error("events: a line too long");
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      if (line === "") {
        if (data.length) dispatch(kind || "message", data.join("\n"), id);
        kind = ""; data = [];
        continue;
      }
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      const v = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
      if (field === "event") kind = v;
      else if (field === "data") data.push(v);
      else if (field === "id") id = v;
    }
  }
}

// openStreams follows the newest runs still going, up to MAX_STREAMS.
function openStreams() {
  const f = focusChat();
  const live = [...rows.values()].filter(r => !r.done && r.job)
    .sort((a, b) => (b.chat === f) - (a.chat === f) || b.updated - a.updated);
  let open = live.filter(r => r.stream).length;
  for (const r of live) {
    if (open >= MAX_STREAMS) break;
    if (!r.stream) { openStream(r); open++; }
  }
}

// askDoc reads a waiting run's whole document for its question, for the
// runs that are not followed live (the list does not carry questions).
async function askDoc(r) {
  if (r.asking) return;
  r.asking = true;
  try {
    const resp = await fetch("chats/" + encodeURIComponent(r.chat), authed({ cache: "no-store" }));
    if (resp.ok) {
      const doc = await resp.json();
      if (doc.job === r.job && !r.stream) setQuestion(r, doc.done ? null : doc.question);
    }
  } catch (e) {
    // the next refresh tries again
  } finally {
    r.asking = false;
  }
}

function update(info) {
  if (!info || typeof info.chat !== "string" || !info.chat) return;
  const r = rows.get(info.chat) || newRow(info.chat);
  const job = text(info.job);
  if (r.job !== job) newRun(r, job);
  r.updated = stamp(info.updated);
  r.tdUpdated.textContent = ago(r.updated);
  r.tdUpdated.title = r.updated ? new Date(r.updated * 1000).toISOString() : "";
  if (r.stream) return; // the stream is as fresh as the list, or fresher
  r.done = info.done === true;
  setState(r, text(info.state));
  setStatus(r, text(info.status), r.done);
  if (info.done || info.state !== "waiting") setQuestion(r, null);
  else askDoc(r);
}

async function refresh() {
  let list;
  try {
    const resp = await fetch("chats", authed({ cache: "no-store" }));
    if (resp.status === 401) {
      setConn("auth");
      return;
    }
    if (!resp.ok) throw new Error("GET chats: " + resp.status);
    list = await resp.json();
    setConn("up");
  } catch (e) {
    setConn("down");
    return;
  }
  if (!Array.isArray(list)) list = [];
  const seen = new Set();
  for (const info of list) {
    // Each row on its own: one chat's bad document leaves the others shown.
    try {
      seen.add(info.chat);
      update(info);
    } catch (e) {
      console.warn("chat row", info && info.chat, e);
    }
  }
  // A chat leaves the list when a new run was submitted and has not
  // started yet (its document is removed first), or when gc removed it.
  for (const [chat, r] of rows) {
    if (!seen.has(chat) && !r.stream) {
      r.tr.remove();
      rows.delete(chat);
    }
  }
  const order = [...rows.values()].sort((a, b) => b.updated - a.updated);
  order.forEach((r, i) => { if (tbody.children[i] !== r.tr) tbody.insertBefore(r.tr, tbody.children[i] || null); });
  document.getElementById("empty").hidden = rows.size > 0 || !!focusChat();
  document.getElementById("runs").hidden = rows.size === 0;
  applyFocus();
  openStreams();
}

window.addEventListener("hashchange", () => { takeToken().then(refresh); applyFocus(); });
takeToken().then(refresh);
setInterval(refresh, REFRESH_MS);
