// Sessions you can find (issue 17): the sidebar's list — title, cwd, last activity, status
// (idle / running / waiting for permission / queued N) and who else is attached — with a
// search box (the server filters: `_meta.agentd.query`), pages, rename, delete (after a
// confirmation dialog), and "fork from here" on the transcript's answers.
import { $, byData, el } from "./dom.js";

const STATUS_LABEL = {idle: "idle", running: "running", waiting_permission: "waiting for permission"};
const STATUS_EVENTS = new Set(["turn_started", "turn_ended", "queue_update"]);
const POLL_MS = 5000;    // other sessions' status and attachments change without telling us
const DEBOUNCE_MS = 150;

let api = null;          // {rpc, open(sessionId), current() -> sessionId, ready() -> bool, closed()}
let query = "";
let pages = 1;           // pages of the list shown ("more" adds one)
let nextCursor = null;
let entries = [];        // the listed sessions, as session/list answered them
let editing = null;      // the sessionId whose title is being edited (no re-render meanwhile)
let generation = 0, timer = 0;

export function initSessions(options) {
  api = options;
  const list = $("sessions");
  const search = el("input", "session-search");
  search.id = "session-search"; search.type = "search";
  search.placeholder = "Search titles and folders"; search.setAttribute("aria-label", "Search sessions");
  let typing = 0;
  search.oninput = () => {
    clearTimeout(typing);
    typing = setTimeout(() => { query = search.value.trim(); pages = 1; quietly(); }, 250);
  };
  list.before(search);
  const more = el("button", "more", "more…");
  more.id = "sessions-more"; more.hidden = true;
  more.onclick = () => { pages += 1; quietly(); };
  list.after(more);
  setInterval(() => { if (document.visibilityState !== "hidden") quietly(); }, POLL_MS);
}

// The list as the server has it now. Refreshes may overlap (one may never be answered if
// the socket drops): only the latest one started is shown.
export async function refresh() {
  const mine = ++generation;
  const got = [];
  let cursor = null;
  for (let i = 0; i < pages; i++) {
    const params = {};
    if (cursor) params.cursor = cursor;
    if (query) params._meta = {agentd: {query}};
    const res = await api.rpc("session/list", params);
    if (mine !== generation) return;
    got.push(...res.sessions);
    cursor = res.nextCursor || null;
    if (!cursor) break;
  }
  entries = got; nextCursor = cursor;
  if (!editing) render();
}

export function scheduleRefresh() {
  clearTimeout(timer);
  timer = setTimeout(quietly, DEBOUNCE_MS);
}

// A background refresh that fails (the socket closed, say) leaves the list as it was.
function quietly() { if (api.ready()) refresh().catch(() => {}); }

// Every notification passes here first: what changes a session's status refreshes the list.
export function onNotification(msg) {
  const p = msg.params || {};
  const update = p.update || {};
  if (msg.method === "session/request_permission" || msg.method === "_agentd/permission/resolved"
      || msg.method === "_agentd/session/snapshot"
      || (msg.method === "_agentd/event" && STATUS_EVENTS.has(p.kind))
      || (msg.method === "session/update" && update.sessionUpdate === "session_info_update")) scheduleRefresh();
}

export function cwdOf(sessionId) { const s = entry(sessionId); return s ? s.cwd : ""; }

function entry(sessionId) { return entries.find((s) => s.sessionId === sessionId); }
function agentd(s) { return (s && s._meta && s._meta.agentd) || {}; }
function accessOf(s) { return agentd(s).access || "owner"; }
function may(s, needs) {
  const rank = {watch: 1, drive: 2, owner: 3};
  return (rank[accessOf(s)] || 0) >= rank[needs];
}

function render() {
  const ul = $("sessions"); ul.replaceChildren();
  const current = api.current();
  for (const s of entries) ul.append(item(s, s.sessionId === current));
  if (!entries.length) ul.append(el("li", "empty muted", query ? "no session matches" : "no sessions yet"));
  $("sessions-more").hidden = !nextCursor;
  syncForkButtons();
}

function item(s, isCurrent) {
  const info = agentd(s);
  const status = info.status || "idle";
  const li = el("li", "session" + (isCurrent ? " current" : ""));
  li.dataset.sessionId = s.sessionId; li.dataset.status = status;
  li.title = s.cwd;
  li.onclick = () => api.open(s.sessionId);
  li.tabIndex = 0;  // reachable by keyboard: Enter opens it, its buttons follow in tab order
  li.onkeydown = (e) => { if (e.key === "Enter" && e.target === li) api.open(s.sessionId); };
  li.append(el("div", "s-title", s.title || s.sessionId));
  const line = el("div", "s-line");
  const badge = el("span", "s-status", STATUS_LABEL[status] || status);
  badge.dataset.status = status;
  line.append(badge);
  if (info.queued) line.append(el("span", "s-queued", `queued ${info.queued}`));
  const time = el("time", "s-time", ago(s.updatedAt));
  time.dateTime = s.updatedAt; time.title = new Date(s.updatedAt).toLocaleString();
  line.append(time);
  const cwd = el("div", "s-cwd", shortPath(s.cwd));
  cwd.title = s.cwd; cwd.dataset.cwd = s.cwd;
  li.append(line, cwd);
  const others = info.attached || [];
  if (others.length) {
    const names = others.map((a) => a.clients > 1 ? `${a.principal} ×${a.clients}` : a.principal);
    const who = el("div", "s-attached", "also here: " + names.join(", "));
    who.title = "other clients attached to this session now";
    li.append(who);
  }
  const actions = el("div", "s-actions");
  if (may(s, "drive")) actions.append(action("rename", "Rename", () => startRename(li, s)));
  if (may(s, "owner")) actions.append(action("delete", "Delete", () => askDelete(s)));
  if (actions.childElementCount) li.append(actions);
  return li;
}

function action(cls, label, run) {
  const b = el("button", cls, label);
  b.type = "button";
  b.onclick = (e) => { e.stopPropagation(); run(); };
  return b;
}

// A long folder by its last two parts: they tell sessions apart (the whole one is its title).
function shortPath(path) {
  const parts = path.split("/").filter(Boolean);
  return path.length <= 30 || parts.length <= 2 ? path : "…/" + parts.slice(-2).join("/");
}

function ago(iso) {
  const s = Math.max(0, (Date.now() - new Date(iso).getTime()) / 1000);
  if (s < 45) return "just now";
  if (s < 3600) return `${Math.round(s / 60)} min ago`;
  if (s < 86400) return `${Math.round(s / 3600)} h ago`;
  return new Date(iso).toLocaleDateString();
}

// ---------------------------------------------------------------- rename

function startRename(li, s) {
  editing = s.sessionId;
  const input = el("input", "rename-input");
  input.value = s.title || ""; input.maxLength = 200; input.setAttribute("aria-label", "New title");
  const title = li.querySelector(".s-title");
  title.replaceWith(input);
  input.onclick = (e) => e.stopPropagation();
  let done = false;
  const finish = async (save) => {
    if (done) return;
    done = true;
    const text = input.value.trim();
    try {
      if (save && text && text !== s.title) await api.rpc("_agentd/session/rename", {sessionId: s.sessionId, title: text});
    } catch { /* the page shows the error */ } finally {
      editing = null;
      quietly();
    }
  };
  input.onkeydown = (e) => {
    if (e.key === "Enter") { e.preventDefault(); finish(true); }
    else if (e.key === "Escape") { e.preventDefault(); finish(false); }
  };
  input.onblur = () => finish(true);
  input.focus(); input.select();
}

// ---------------------------------------------------------------- delete

function confirmDialog() {
  let dlg = $("confirm-delete");
  if (dlg) return dlg;
  dlg = el("dialog", "confirm"); dlg.id = "confirm-delete";
  const buttons = el("div", "buttons");
  const cancel = el("button", "cancel", "Cancel"); cancel.value = "cancel";
  const ok = el("button", "confirm-delete danger", "Delete"); ok.value = "delete";
  cancel.onclick = () => dlg.close("cancel");
  ok.onclick = () => dlg.close("delete");
  buttons.append(cancel, ok);
  dlg.append(el("p", "question"), el("p", "muted", "Its history and queued prompts are removed for good."), buttons);
  document.body.append(dlg);
  return dlg;
}

async function askDelete(s) {
  const dlg = confirmDialog();
  dlg.querySelector(".question").textContent = `Delete “${s.title || s.sessionId}”?`;
  dlg.dataset.sessionId = s.sessionId;
  dlg.returnValue = "";
  const answer = new Promise((resolve) => { dlg.onclose = () => resolve(dlg.returnValue); });
  dlg.showModal();
  dlg.querySelector("button.cancel").focus();  // Enter alone does not delete
  if (await answer !== "delete") return;
  try {
    await api.rpc("session/delete", {sessionId: s.sessionId});
    if (api.current() === s.sessionId) api.closed();
  } catch { /* the page shows the error */ }
  quietly();
}

// ---------------------------------------------------------------- fork from a message

// An answer of the transcript is complete at `seq`: a "fork from here" line follows it (the
// owner's; a sibling, so the answer's own text stays only the answer).
export function markForkPoint(messageId, seq) {
  if (!messageId || typeof seq !== "number") return;
  const bubble = byData(".msg.agent", "message-id", messageId);
  if (!bubble) return;
  bubble.dataset.seq = String(seq);
  let bar = byData(".fork-point", "message-id", messageId);
  if (!bar) {
    bar = el("div", "fork-point"); bar.dataset.messageId = messageId;
    const b = el("button", "fork", "fork from here");
    b.type = "button"; b.title = "A new session with the conversation up to this answer";
    b.onclick = () => fork(Number(bubble.dataset.seq));
    bar.append(b);
  }
  if (bubble.nextElementSibling !== bar) bubble.after(bar);
  syncForkButtons();
}

// A turn's last answer forks at the turn's end: the fork has the whole turn, not one that
// looks cut off.
export function onTurnEnded(seq) {
  if (typeof seq !== "number") return;
  const t = $("transcript");
  const bars = t.querySelectorAll(".fork-point"), starts = t.querySelectorAll(".turn-start");
  const last = bars[bars.length - 1], start = starts[starts.length - 1];
  if (!last || (start && !(start.compareDocumentPosition(last) & Node.DOCUMENT_POSITION_FOLLOWING))) return;
  const bubble = byData(".msg.agent", "message-id", last.dataset.messageId);
  if (bubble) bubble.dataset.seq = String(seq);
}

function syncForkButtons() {
  const s = entry(api.current());
  const allowed = !s || may(s, "owner");
  for (const bar of document.querySelectorAll("#transcript .fork-point")) bar.hidden = !allowed;
}

async function fork(seq) {
  const from = api.current();
  if (!from) return;
  try {
    const res = await api.rpc("_agentd/session/fork", {sessionId: from, upToSeq: seq});
    await api.open(res.sessionId);
  } catch { /* the page shows the error */ }
}
