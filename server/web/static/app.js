// agentd's own page: one WebSocket to /acp speaking ACP + the _agentd extensions.
import { dropPermission, onToolUpdate, showPermission } from "./cards.js";
import { $, el } from "./dom.js";
import * as S from "./sessions.js";
import * as T from "./transcript.js";

const params = new URLSearchParams(location.search);
let token = params.get("token") || localStorage.getItem("agentd.token") || "";
$("token").value = token;
let ws, nextId = 1, current = null;
let queueState = [], snapshotSeq = 0;  // the shown queue; the lastSeq of the last snapshot
const pending = new Map();             // request id -> {resolve, reject}
const mine = new Map();                // requestId of a prompt this page sent -> its text

const CAPABILITIES = {session: {compaction: {}, notices: {}}};

function connect() {
  const url = location.origin.replace(/^http/, "ws") + "/acp";
  ws = token ? new WebSocket(url, ["acp", "agentd.bearer." + token]) : new WebSocket(url);
  ws.onopen = async () => {
    const init = await rpc("initialize", {protocolVersion: 1, clientCapabilities: CAPABILITIES});
    $("connection").textContent = "connected to " + init.agentInfo.name + " " + init.agentInfo.version;
    await refreshSessions();
    const wanted = params.get("session");
    if (wanted) openSession(wanted);
  };
  ws.onclose = () => { $("connection").textContent = "disconnected (reload to retry)"; };
  ws.onmessage = (ev) => onMessage(JSON.parse(ev.data));
}

function rpc(method, p) {
  const id = nextId++;
  ws.send(JSON.stringify({jsonrpc: "2.0", id, method, params: p}));
  return new Promise((resolve, reject) => pending.set(id, {resolve, reject}));
}
function notify(method, p) { ws.send(JSON.stringify({jsonrpc: "2.0", method, params: p})); }

function onMessage(msg) {
  if (msg.id !== undefined && !msg.method) {
    const waiter = pending.get(msg.id); pending.delete(msg.id);
    if (!waiter) return;
    if (msg.error) { T.showError(msg.error.message); waiter.reject(msg.error); } else waiter.resolve(msg.result);
    return;
  }
  S.onNotification(msg);
  const p = msg.params || {};
  if (msg.method === "session/request_permission") return askPermission(msg.id, p);
  if (p.sessionId && p.sessionId !== current) return;  // another session this socket watches
  const meta = (p._meta || {}).agentd || {};
  if (msg.method === "session/update") return onUpdate(p.update, meta);
  if (msg.method === "_agentd/session/snapshot") return onSnapshot(p);
  if (msg.method === "_agentd/permission/resolved") return dropPermission(p.requestId);
  if (msg.method === "_agentd/event") return onEvent(p.kind, p.event, meta.seq);
}

function onUpdate(u, meta) {
  const kind = u.sessionUpdate;
  if (kind === "user_message_chunk" || kind === "agent_message_chunk" || kind === "agent_thought_chunk") {
    const cls = kind === "user_message_chunk" ? "user" : kind === "agent_thought_chunk" ? "thought" : "agent";
    const text = u.content && u.content.type === "text" ? u.content.text : "[" + (u.content || {}).type + "]";
    T.onText(cls, u.messageId, text, !!meta.final);
    if (kind === "agent_message_chunk" && meta.final) S.markForkPoint(u.messageId, meta.seq);
  } else if (kind === "tool_call" || kind === "tool_call_update") onToolUpdate(u);
  else if (kind === "plan") T.onPlan(u.entries);
  else if (kind === "usage_update") T.onUsage(u, meta);
  else if (kind === "compaction_update") T.onCompaction(u);
  else if (kind === "notice") T.onNotice(u);
  // A replayed title is history (a fork's is its source's): the snapshot's is the current one.
  else if (kind === "session_info_update" && u.title && !(meta.seq <= snapshotSeq)) $("session-title").textContent = u.title;
  else if (kind === "current_mode_update") $("session-title").dataset.mode = u.currentModeId;
}

function onEvent(kind, ev, seq) {
  if (kind === "turn_started") {
    setStatus("running");
    const marker = T.onTurnStarted(ev);
    // Our own prompt is not echoed back: it shows here, when its turn starts (not when sent).
    if (ev.requestId && mine.has(ev.requestId)) { T.userMessage(mine.get(ev.requestId), marker); mine.delete(ev.requestId); }
  } else if (kind === "turn_ended") { setStatus("idle"); T.onTurnEnded(ev); S.onTurnEnded(seq); }
  else if (kind === "queue_update") { if (!(seq <= snapshotSeq)) applyQueueUpdate(ev); }
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
  // The snapshot has the whole queue; replayed queue_update deltas up to it are history.
  snapshotSeq = s.lastSeq || 0;
  queueState = s.queue.map((q) => ({id: q.promptId, version: q.version, text: q.text}));
  renderQueue(queueState);
}

// A queue_update carries only what changed (docs/protocol.md): apply it in order.
function applyQueueUpdate(ev) {
  let q = queueState.slice();
  for (const c of ev.changes || []) {
    if (c.change === "removed") q = q.filter((e) => e.id !== c.id);
    else if (c.change === "added") q.splice(c.index, 0, c.entry);
    else if (c.change === "updated") q = q.map((e) => e.id === c.entry.id ? {text: e.text, ...c.entry} : e);
    else if (c.change === "moved") { const byId = new Map(q.map((e) => [e.id, e])); q = c.order.map((id) => byId.get(id)).filter(Boolean); }
  }
  queueState = q;
  renderQueue(queueState);
}

function setStatus(status) { $("status").textContent = status; $("status").className = status; }

function renderQueue(queue) {
  const ul = $("queue"); ul.replaceChildren();
  for (const q of queue) {
    const li = el("li"); li.dataset.promptId = q.id;
    li.append(el("span", "", q.text + " "));
    const rm = el("button", "remove", "remove");
    rm.onclick = () => rpc("_agentd/queue/remove", {sessionId: current, id: q.id, expectedVersion: q.version || 1});
    li.append(rm); ul.append(li);
  }
}

function askPermission(id, p) {
  const requestId = ((p._meta || {}).agentd || {}).requestId || String(id);
  const answer = (optionId) => {
    ws.send(JSON.stringify({jsonrpc: "2.0", id, result: {outcome: {outcome: "selected", optionId}}}));
    dropPermission(requestId);
  };
  showPermission(requestId, p, answer, !p.sessionId || p.sessionId === current);
}

const refreshSessions = () => S.refresh();  // the list: sessions.js
S.initSessions({
  rpc, open: openSession, current: () => current, ready: () => !!ws && ws.readyState === WebSocket.OPEN,
  closed: () => { current = null; clearView(); $("session-title").textContent = "No session"; setStatus("idle"); },
});

function clearView() {
  T.reset(); $("queue").replaceChildren(); queueState = []; snapshotSeq = 0;
  $("permissions").replaceChildren(el("div", "muted", "none"));
}

async function openSession(sessionId) {
  if (current && current !== sessionId) await rpc("_agentd/session/detach", {sessionId: current}).catch(() => {});
  current = sessionId;
  clearView();
  await rpc("_agentd/session/attach", {sessionId, afterSeq: 0});
  await refreshSessions();
}

$("new-session").onclick = async () => {
  const res = await rpc("session/new", {cwd: $("new-session-cwd").value.trim(), mcpServers: []});
  if (current) await rpc("_agentd/session/detach", {sessionId: current}).catch(() => {});
  current = res.sessionId;  // session/new already subscribed this socket
  clearView();
  $("session-title").textContent = res.sessionId; setStatus("idle");
  await refreshSessions();
};

async function send() {
  const text = $("prompt").value.trim();
  if (!text || !current) return;
  $("prompt").value = "";
  // The prompt waits in the queue (shown there) and appears in the transcript when it runs.
  const requestId = "web-" + Date.now().toString(36) + "-" + Math.random().toString(36).slice(2);
  mine.set(requestId, text);
  await rpc("_agentd/prompt/enqueue", {sessionId: current, prompt: [{type: "text", text}], _meta: {agentd: {requestId}}});
}
$("send").onclick = send;
$("prompt").onkeydown = (e) => { if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); send(); } };
$("cancel").onclick = () => current && notify("session/cancel", {sessionId: current});
$("token").onchange = () => { token = $("token").value.trim(); localStorage.setItem("agentd.token", token); ws.close(); connect(); };
connect();
