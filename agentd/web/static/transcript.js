// The transcript: messages (markdown), reasoning (folded), turn markers with usage and cost,
// compaction markers and notices; the pinned plan, the goal and the session's usage.
import { $, byData, el, formatCost, formatTokens, scrollDown } from "./dom.js";
import { renderMarkdown } from "./render/markdown.js";

const texts = new Map();  // messageId -> text so far (agent messages and thoughts)
const dirty = new Set();  // bubbles to re-render at the next frame
let frame = 0;
let turns = [];           // [{turnId, usage, cost, used, size, el}]
let currentTurn = null;
const finished = new Set();  // messageIds whose final text arrived
const resync = new Map();    // messageId -> {have, got}: text re-sent from its start after a reconnect

export function reset() {
  texts.clear(); dirty.clear(); turns = []; currentTurn = null; finished.clear(); resync.clear();
  $("transcript").replaceChildren();
  $("plan").replaceChildren(); $("plan-box").hidden = true;
  $("goal").replaceChildren(); $("goal-box").hidden = true;
  renderSessionUsage();
}

function render() {
  frame = 0;
  for (const b of dirty) {
    const body = b.querySelector(".body");
    renderMarkdown(body, texts.get(b.dataset.messageId) || "");
    if (b.classList.contains("thought")) b.querySelector("summary").textContent = thoughtLabel(b);
  }
  dirty.clear();
  scrollDown();
}
function schedule(b) { dirty.add(b); if (!frame) frame = requestAnimationFrame(render); }

function thoughtLabel(b) {
  const words = (texts.get(b.dataset.messageId) || "").trim().split(/\s+/).filter(Boolean).length;
  return `Reasoning · ${words} word${words === 1 ? "" : "s"}`;
}

function agentBubble(kind, messageId) {
  let b = messageId && byData(kind === "thought" ? ".thought" : ".msg.agent", "message-id", messageId);
  if (b) return b;
  if (kind === "thought") {
    b = el("details", "thought");
    b.append(el("summary", "", "Reasoning"), el("div", "body"));
  } else {
    b = el("div", "msg agent");
    b.append(el("div", "body"));
  }
  b.dataset.messageId = messageId || "m" + Math.random().toString(36).slice(2);
  $("transcript").append(b);
  return b;
}

export function userMessage(text, after) {
  const b = el("div", "msg user", text);
  if (after && after.isConnected) after.after(b); else $("transcript").append(b);
  scrollDown();
  return b;
}

// A streamed chunk (`final`: the message's whole text, from a replay).
export function onText(kind, messageId, text, final) {
  if (kind === "user") { userMessage(text); return; }
  const b = agentBubble(kind, messageId);
  const id = b.dataset.messageId;
  if (final) {
    finished.add(id); resync.delete(id);
    // After a server restart the stored text may lag what streamed here: never shrink it.
    const have = texts.get(id) || "";
    if (have.length > text.length && have.startsWith(text)) return;
  }
  else if (resync.has(id)) {  // the server sends a streaming message again from its start
    const r = resync.get(id);
    r.got += text.length;
    if (r.got <= r.have) return;
    text = text.slice(text.length - (r.got - r.have));
    resync.delete(id);
  }
  texts.set(id, final ? text : (texts.get(id) || "") + text);
  schedule(b);
}

// A new connection re-attached: a message still streaming is sent again from its start;
// only what this page does not have yet is added.
export function reconnected() {
  resync.clear();
  for (const [id, text] of texts) if (text && !finished.has(id)) resync.set(id, {have: text.length, got: 0});
}

// The end of a streamed message; one this page never saw stream arrives whole.
export function onFinalText(kind, messageId, text) {
  const b = agentBubble(kind, messageId);
  finished.add(b.dataset.messageId); resync.delete(b.dataset.messageId);
  if (!texts.get(b.dataset.messageId)) { texts.set(b.dataset.messageId, text); schedule(b); }
}

export function onTurnStarted(ev) {
  const marker = el("div", "turn-start");
  marker.dataset.turnId = ev.turnId || "";
  $("transcript").append(marker);
  currentTurn = {turnId: ev.turnId, usage: null, cost: null, used: 0, size: 0, el: marker};
  turns.push(currentTurn);
  return marker;
}

export function onTurnEnded(ev) {
  const turn = turns.find((t) => t.turnId === ev.turnId) || currentTurn;
  const line = el("div", "turn-end");
  line.dataset.turnId = ev.turnId || "";
  const parts = [];
  if (ev.outcome === "interrupted") parts.push("interrupted" + (ev.reason ? ` (${ev.reason.replace(/_/g, " ")})` : ""));
  else if (ev.stopReason && ev.stopReason !== "end_turn") parts.push(ev.stopReason.replace(/_/g, " "));
  if (turn && turn.usage) {
    const u = turn.usage;
    parts.push(`${formatTokens(u.inputTokens || 0)} in · ${formatTokens(u.outputTokens || 0)} out`);
    if (u.cacheReadTokens) parts.push(`${formatTokens(u.cacheReadTokens)} cached`);
  }
  if (turn && turn.cost) parts.push(formatCost(turn.cost));
  line.textContent = parts.join(" · ");
  if (parts.length) $("transcript").append(line);
  if (turn === currentTurn) currentTurn = null;
  renderSessionUsage();
  scrollDown();
}

export function onUsage(u, meta) {
  const turn = currentTurn || turns[turns.length - 1];
  if (!turn) return;
  if (meta.turnUsage) turn.usage = meta.turnUsage;
  turn.cost = u.cost ? u.cost.amount : (meta.turnUsage && meta.turnUsage.cost) || turn.cost;
  turn.used = u.used; turn.size = u.size;
  renderSessionUsage();
}

function renderSessionUsage() {
  const withUsage = turns.filter((t) => t.usage || t.cost);
  const box = $("usage");
  if (!turns.length) { box.textContent = "no turns yet"; $("session-usage").textContent = ""; return; }
  const sum = (k) => withUsage.reduce((n, t) => n + ((t.usage && t.usage[k]) || 0), 0);
  const cost = withUsage.reduce((n, t) => n + (t.cost || 0), 0);
  const last = turns[turns.length - 1];
  box.replaceChildren();
  const rows = [
    ["turns", String(turns.length)],  // every turn, with usage reported or not
    ["input", formatTokens(sum("inputTokens"))],
    ["output", formatTokens(sum("outputTokens"))],
    ["cost", cost ? formatCost(cost) : "—"],
  ];
  if (last && last.size) rows.push(["context", `${formatTokens(last.used)} / ${formatTokens(last.size)}`]);
  const dl = el("dl", "usage-table");
  for (const [k, v] of rows) { dl.append(el("dt", "", k), el("dd", "", v)); dl.lastChild.dataset.key = k; }
  box.append(dl);
  box.className = "";
  $("session-usage").textContent = `${formatTokens(sum("inputTokens") + sum("outputTokens"))} tokens` + (cost ? ` · ${formatCost(cost)}` : "");
}

const PLAN_ICON = {completed: "✓", in_progress: "▸", pending: "○"};
export function onPlan(entries) {
  const ol = $("plan");
  ol.replaceChildren();
  for (const e of entries || []) {
    const li = el("li", "plan-entry");
    li.dataset.status = e.status || "pending";
    li.append(el("span", "icon", PLAN_ICON[e.status] || "○"), el("span", "", " " + e.content));
    ol.append(li);
  }
  $("plan-box").hidden = !(entries && entries.length);
}

export function onGoal(goal) {
  const box = $("goal");
  if (!goal || !goal.objective || goal.status === "cleared") { $("goal-box").hidden = true; box.replaceChildren(); return; }
  box.replaceChildren();
  const status = el("span", "goal-status", goal.status);
  status.dataset.status = goal.status;
  box.append(status, el("div", "goal-objective", goal.objective));
  const facts = [`round ${goal.rounds || 0}`];
  if (goal.tokenBudget) facts.push(`${formatTokens(goal.tokensUsed || 0)} / ${formatTokens(goal.tokenBudget)} tokens`);
  else if (goal.tokensUsed) facts.push(`${formatTokens(goal.tokensUsed)} tokens`);
  box.append(el("div", "muted", facts.join(" · ")));
  for (const [key, label] of [["pauseReason", "paused"], ["userAction", "needed from you"], ["lastVerdict", "last verdict"]]) {
    const v = goal[key];
    if (v) box.append(el("div", "goal-note", `${label}: ${typeof v === "string" ? v : JSON.stringify(v)}`));
  }
  $("goal-box").hidden = false;
}

export function onCompaction(u) {
  const id = u.compactionId || "compaction";
  let m = byData(".compaction", "compaction-id", id);
  if (!m) {
    m = el("details", "compaction");
    m.dataset.compactionId = id;
    m.append(el("summary"), el("div", "body"));
    $("transcript").append(m);
  }
  m.dataset.status = u.status;
  const info = ((u._meta || {}).agentd) || {};
  const label = {
    in_progress: "compacting the conversation…",
    completed: `conversation compacted${info.replacedMessages ? ` · ${info.replacedMessages} earlier messages summarised` : ""}`,
    failed: "compaction failed" + (u.error ? `: ${u.error}` : ""),
    cancelled: "compaction cancelled",
  }[u.status] || "compaction " + u.status;
  m.querySelector("summary").textContent = label;
  const summary = (u.summary || []).filter((b) => b.type === "text").map((b) => b.text).join("\n");
  if (summary) renderMarkdown(m.querySelector(".body"), summary);
  scrollDown();
}

export function onNotice(u) {
  const n = el("div", "notice", u.title);
  n.dataset.severity = u.severity || "info";
  $("transcript").append(n);
  scrollDown();
}

export function showError(text) {
  const div = el("div", "notice error", "⚠ " + text);
  div.dataset.severity = "error";
  $("transcript").append(div);
  scrollDown();
}
