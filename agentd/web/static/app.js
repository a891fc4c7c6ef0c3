// agentd's own page: one WebSocket to /acp speaking ACP + the _agentd extensions.
import { dropPermission, onToolUpdate, showPermission } from "./cards.js";
import { initChanges, refreshChanges, resetChanges } from "./changes.js";
import { $, el } from "./dom.js";
import * as S from "./sessions.js";
import * as T from "./transcript.js";
// ---- issue 17 items 4-5: queue, reconnect, sign-in (queue.js, connection.js, signin.js)
import { CONNECTION_LOST, Connection } from "./connection.js";
import { QueueView } from "./queue.js";
import { ModelPicker } from "./models.js";
import { REVOKED, checkToken, forgetToken, signIn, takeToken } from "./signin.js";

const params = new URLSearchParams(location.search);
let conn = null, current = null;
let closedElsewhere = false;  // another client closed the session shown (onResync)
let lastSeq = 0, snapshotSeq = 0;      // the last durable seq seen; the lastSeq of the last snapshot
const mine = new Map();                // requestId of a prompt this page sent -> {text, promptId}
const RESYNC_REQUIRED = -32017;

const rpc = (method, p, opts) => conn.rpc(method, p, opts).catch((e) => {
  T.showError(e.message === CONNECTION_LOST ? "Not sent: the connection was lost." : sentence(e.message)); throw e;
});

// A server error as a person reads it: no "Invalid params: field:" or validator prefixes.
function sentence(message) {
  const text = String(message || "something went wrong")
    .replace(/^Invalid params: (?:[\w.]+: )?/, "").replace(/^Value error, /, "").trim();
  return /[.!?]$/.test(text) ? text : text + ".";
}
const notify = (method, p) => conn.notify(method, p);
const queue = new QueueView({rpc: (m, p) => conn.rpc(m, p), session: () => current, interjected});
const models = new ModelPicker({rpc: (m, p) => rpc(m, p), session: () => current});

// A queued prompt of ours moved into the running turn: the server does not echo our own
// text back, so it shows here (another client's comes as a user message).
function interjected(entry) {
  for (const [requestId, m] of mine) {
    if (m.promptId === entry.id) { mine.delete(requestId); T.userMessage(entry.text).classList.add("interjected"); return; }
  }
}

function setConnection(state, text) {
  $("connection").textContent = text; $("connection").dataset.state = state;
  document.body.dataset.connection = state;
}

async function onReady(reconnected) {
  $("signout").hidden = !conn.token;
  if (reconnected && current) { T.reconnected(); await attach(current, lastSeq); refreshSessions().catch(() => {}); return; }
  await refreshSessions();
  models.load().catch(() => {});
  const wanted = params.get("session");
  if (wanted && !current) openSession(wanted);
}

// (Re-)attach from `after`: a snapshot, the events after it, then live; a cursor the server
// can no longer serve starts over from an empty view.
async function attach(sessionId, after) {
  try {
    await conn.rpc("_agentd/session/attach", {sessionId, afterSeq: after});
  } catch (e) {
    if (e.code !== RESYNC_REQUIRED) { T.showError(e.message); return; }
    clearView();
    await rpc("_agentd/session/attach", {sessionId, afterSeq: 0});
  }
}

async function start() {
  const token = takeToken();
  const check = await checkToken(token);
  let ok = check.ok ? token : await signIn(token ? check.detail : "");
  conn = new Connection({
    token: ok, onReady, onMessage, onStatus: setConnection, checkToken,
    onAuthLost: async () => {
      forgetToken(); setConnection("signed-out", "signed out: the token was revoked");
      ok = await signIn(REVOKED); conn.token = ok; conn.start();
    },
  });
  conn.start();
}
$("signout").onclick = () => { forgetToken(); location.reload(); };
// The page goes away while editing: release its holds over HTTP (a keepalive request
// outlives the page; the socket may already be closing).
addEventListener("pagehide", () => {
  const holds = queue.takeHolds();
  if (!holds.length) return;
  const body = holds.map((params, i) => ({jsonrpc: "2.0", id: i + 1, method: "_agentd/queue/release", params}));
  const headers = {"Content-Type": "application/json"};
  if (conn && conn.token) headers.Authorization = "Bearer " + conn.token;
  fetch("/rpc", {method: "POST", keepalive: true, headers, body: JSON.stringify(body)}).catch(() => {});
});
// ---- end of the issue 17 items 4-5 block

function onMessage(msg) {
  S.onNotification(msg);
  const p = msg.params || {};
  if (msg.method === "session/request_permission") return askPermission(msg.id, p);
  if (p.sessionId && p.sessionId !== current) return;  // another session this socket watches
  const meta = (p._meta || {}).agentd || {};
  if (msg.method === "_agentd/resync_required") return onResync(p);
  if (typeof meta.seq === "number" && !meta.transient && msg.method !== "_agentd/session/snapshot") {
    if (meta.seq <= lastSeq) return;  // already shown (a re-attach replays from the cursor)
    lastSeq = meta.seq;
  }
  if (msg.method === "session/update") return onUpdate(p.update, meta);
  if (msg.method === "_agentd/session/snapshot") return onSnapshot(p);
  if (msg.method === "_agentd/permission/resolved") return dropPermission(p.requestId);
  if (msg.method === "_agentd/event") return onEvent(p.kind, p.event, meta.seq);
}

// Deleted elsewhere: the session is gone. Closed by another client: the transcript stays and
// the page stays detached (re-attaching would load the session straight back); the next
// prompt re-attaches first. Anything else: start the view again from the log.
function onResync(p) {
  if (p.reason === "session_deleted") {
    current = null; clearView(); $("session-title").textContent = "No session"; setStatus("idle");
    T.showError("This session was deleted.");
    return refreshSessions();
  }
  if (p.reason === "session_closed") {
    closedElsewhere = true; setStatus("idle");
    T.onNotice({title: "Closed by another client. Your next prompt opens it again.", severity: "info"});
    return refreshSessions();
  }
  clearView(); return attach(current, 0);
}

function onUpdate(u, meta) {
  const kind = u.sessionUpdate;
  if (kind === "user_message_chunk" || kind === "agent_message_chunk" || kind === "agent_thought_chunk") {
    const cls = kind === "user_message_chunk" ? "user" : kind === "agent_thought_chunk" ? "thought" : "agent";
    const text = u.content && u.content.type === "text" ? u.content.text : "[" + (u.content || {}).type + "]";
    if (cls === "user") forgetMine(text);  // echoed after all (a re-attach on a new socket)
    T.onText(cls, u.messageId, text, !!meta.final);
    // (A transient final chunk — text this page did not see stream — is at the seq before
    // the message: its `agent_message` event that follows marks the fork point.)
    if (kind === "agent_message_chunk" && meta.final && !meta.transient) S.markForkPoint(u.messageId, meta.seq);
  } else if (kind === "tool_call" || kind === "tool_call_update") onToolUpdate(u);
  else if (kind === "plan") T.onPlan(u.entries);
  else if (kind === "usage_update") T.onUsage(u, meta);
  else if (kind === "compaction_update") T.onCompaction(u);
  else if (kind === "notice") T.onNotice(u);
  // A replayed title is history (a fork's is its source's): the snapshot's is the current one.
  else if (kind === "session_info_update" && u.title && !(meta.seq <= snapshotSeq)) $("session-title").textContent = u.title;
  else if (kind === "current_mode_update") $("session-title").dataset.mode = u.currentModeId;
  else if (kind === "config_option_update") models.fromConfigOptions(u.configOptions);
}

function onEvent(kind, ev, seq) {
  if (kind === "turn_started") {
    setStatus("running");
    const marker = T.onTurnStarted(ev);
    // Our own prompt is not echoed back: it shows here, when its turn starts (not when sent),
    // as last edited in the queue.
    if (ev.requestId && mine.has(ev.requestId)) {
      T.userMessage(queue.textOf(ev.promptId) ?? mine.get(ev.requestId).text, marker);
      mine.delete(ev.requestId);
    }
  } else if (kind === "turn_ended") { setStatus("idle"); T.onTurnEnded(ev); S.onTurnEnded(seq); changesSoon(); }
  else if (kind === "rewound" || kind === "file_reverted") changesSoon();
  else if (kind === "queue_update") { if (!(seq <= snapshotSeq)) queue.apply(ev); }
  else if ((kind === "agent_message" || kind === "agent_thought") && ev.text) {
    T.onFinalText(kind === "agent_thought" ? "thought" : "agent", ev.messageId, ev.text);
    if (kind === "agent_message") S.markForkPoint(ev.messageId, seq);
  } else if (kind === "goal") T.onGoal(ev);
  else if (kind === "compaction") T.onCompaction(ev);
  else if (kind === "notice") T.onNotice(ev);
}

function onSnapshot(s) {
  setStatus(s.status);
  $("session-title").textContent = s.title || s.sessionId;
  T.onGoal(s.goal);
  models.setCurrent(s.model);
  // The snapshot has the whole queue; replayed queue_update deltas up to it are history.
  snapshotSeq = s.lastSeq || 0;
  queue.replace(s.queue);
}

function setStatus(status) { $("status").textContent = status; $("status").className = status; }

function askPermission(id, p) {
  const requestId = ((p._meta || {}).agentd || {}).requestId || String(id);
  const answer = (optionId) => {
    conn.send({jsonrpc: "2.0", id, result: {outcome: {outcome: "selected", optionId}}});
    dropPermission(requestId);
  };
  // The same question asked again after a re-attach: the new card (and its id) replaces the old.
  if (document.querySelector(`.permission[data-request-id="${CSS.escape(requestId)}"]`)) dropPermission(requestId);
  showPermission(requestId, p, answer, !p.sessionId || p.sessionId === current);
  const card = document.querySelector(`.permission[data-request-id="${CSS.escape(requestId)}"]`);
  if (card) card.dataset.connection = String(conn.generation);  // which socket asked
}

const refreshSessions = () => S.refresh();  // the list: sessions.js
S.initSessions({
  rpc, open: openSession, current: () => current, ready: () => !!conn && conn.open,
  closed: () => { current = null; clearView(); $("session-title").textContent = "No session"; setStatus("idle"); },
});

// The Changes view follows the session's turns; a replay's many turn_ended make one read.
let changesTimer = 0;
function changesSoon() { clearTimeout(changesTimer); changesTimer = setTimeout(() => refreshChanges(), 200); }
initChanges({rpc: (m, p) => conn.rpc(m, p), current: () => current, open: (sid) => openSession(sid)});

function clearView() {
  T.reset(); queue.reset(); resetChanges(); models.reset(); snapshotSeq = 0; lastSeq = 0;
  $("permissions").replaceChildren(el("div", "muted", "none"));
}

async function openSession(sessionId) {
  closedElsewhere = false;
  if (current && current !== sessionId) await rpc("_agentd/session/detach", {sessionId: current}).catch(() => {});
  current = sessionId;
  clearView();
  await attach(sessionId, 0);
  await refreshSessions();
  changesSoon();
}

// A new session in the folder typed, or (empty) the server's default workspace for this
// principal; the status line says what is happening and where the session works.
let creating = null;
function newSession() {
  if (!creating) creating = createSession().finally(() => { creating = null; });
  return creating;
}
async function createSession() {
  const status = $("new-session-status"), button = $("new-session");
  const cwd = $("new-session-cwd").value.trim();
  status.dataset.state = "busy"; status.textContent = "Creating a session…"; button.disabled = true;
  try {
    const res = await conn.rpc("session/new", {cwd, mcpServers: []});
    if (current) await conn.rpc("_agentd/session/detach", {sessionId: current}).catch(() => {});
    current = res.sessionId;  // session/new already subscribed this socket
    closedElsewhere = false;
    clearView();
    $("session-title").textContent = res.sessionId; setStatus("idle");
    models.fromConfigOptions(res.configOptions);
    await refreshSessions().catch(() => {});
    status.dataset.state = "done";
    status.textContent = "New session in " + (S.cwdOf(res.sessionId) || cwd || "your default workspace");
    return true;
  } catch (e) {
    status.dataset.state = "error";
    status.textContent = "Could not create a session: " + sentence(e.message === CONNECTION_LOST ? "the connection was lost" : e.message);
    return false;
  } finally {
    button.disabled = false;
  }
}
$("new-session").onclick = () => newSession();

// The prompt waits in the queue (shown there) and appears in the transcript when it runs.
// Sent under a requestId: after a dropped connection it is sent again, never queued twice.
async function submit(method) {
  const text = $("prompt").value.trim();
  if (!text) return;
  if (!current && !(await newSession())) return;  // the first prompt needs no Create first
  if (closedElsewhere) { closedElsewhere = false; await attach(current, lastSeq); }
  $("prompt").value = "";
  const requestId = "web-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2);
  const prompt = [{type: "text", text}];
  const mineNow = {text, promptId: null};
  mine.set(requestId, mineNow);
  if (method === "_agentd/interject") {
    const res = await rpc(method, {sessionId: current, prompt, _meta: {agentd: {requestId}}});
    if (res.status === "interjected") { mine.delete(requestId); T.userMessage(text).classList.add("interjected"); }
    else mineNow.promptId = res.promptId;
    return;
  }
  const res = await rpc(method, {sessionId: current, prompt, _meta: {agentd: {requestId}}}, {retry: true});
  mineNow.promptId = res.promptId;
}

// A user message the server did send us is one of ours it would otherwise not echo.
function forgetMine(text) {
  for (const [requestId, m] of mine) {
    if (m.text === text || (m.promptId && queue.textOf(m.promptId) === text)) { mine.delete(requestId); return; }
  }
}
$("send").onclick = () => submit("_agentd/prompt/enqueue");
$("send-now").onclick = () => submit("_agentd/prompt/send_now");
$("interject").onclick = () => submit("_agentd/interject");
$("prompt").onkeydown = (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); submit("_agentd/prompt/enqueue"); } };
$("cancel").onclick = () => current && notify("session/cancel", {sessionId: current});
start();
