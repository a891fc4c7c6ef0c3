// Tool cards (status, what the call does, streamed output) and permission cards (approve
// with eyes open: the diff, the new file, the command and its cwd, an MCP call's arguments;
// y / a / n answer the focused request).
import { $, byData, el, scrollDown } from "./dom.js";
import { diffView } from "./render/diff.js";
import { highlight } from "./render/highlight.js";

const STATE_LABEL = {pending: "waiting", in_progress: "running", completed: "ok", failed: "failed"};
const KEYS = {y: "allow_once", a: "allow_always", n: "reject_once"};
const OUTPUT_OPEN_LINES = 12;

function block(cls, label, text, family) {
  const box = el("div", "detail " + cls);
  if (label) box.append(el("span", "detail-label", label));
  const pre = el("pre");
  pre.append(highlight(text, family));
  box.append(pre);
  return box;
}

// What a call will do, from its announcement or a permission request's `toolCall`.
export function previewOf(call) {
  const frag = document.createDocumentFragment();
  const meta = ((call._meta || {}).agentd) || {};
  const raw = call.rawInput && typeof call.rawInput === "object" ? call.rawInput : {};
  const command = meta.command ?? (call.kind === "execute" ? raw.command : undefined);
  if (typeof command === "string") {
    const cmd = block("command", null, "$ " + command, "sh");
    if (meta.cwd || raw.cwd) cmd.append(el("div", "cwd", "in " + (meta.cwd || raw.cwd)));
    if (meta.background || raw.run_in_background) cmd.append(el("div", "cwd", "runs in the background"));
    frag.append(cmd);
  }
  if (call.kind === "fetch" && typeof raw.url === "string") {
    const box = el("div", "detail fetch");
    box.append(el("span", "detail-label", "fetches"), el("code", "url", raw.url));
    box.append(el("div", "cwd", "a GET from the web, public addresses only; the page comes back as text"));
    frag.append(box);
  }
  if (meta.mcpServer) {
    frag.append(block("args", `MCP ${meta.mcpServer} → ${meta.mcpTool}`, JSON.stringify(meta.arguments ?? raw, null, 2), "js"));
  } else if (call.kind === "other" && command === undefined && Object.keys(raw).length) {
    frag.append(block("args", "arguments", JSON.stringify(raw, null, 2), "js"));
  }
  for (const item of call.content || []) {
    if (item.type === "diff") frag.append(diffView(item));
    else if (item.type === "content" && item.content && item.content.type === "text") frag.append(el("div", "detail note", item.content.text));
  }
  return frag;
}

export function toolCard(id) {
  let card = byData(".tool", "tool-call-id", id);
  if (card) return card;
  card = el("div", "tool");
  card.dataset.toolCallId = id;
  const head = el("div", "tool-head");
  head.append(el("span", "state", "waiting"), el("span", "title"));
  const out = el("details", "tool-out");
  out.hidden = true;
  out.append(el("summary", "", "output"), el("pre", "output"));
  card.append(head, el("div", "tool-detail"), out, el("div", "ask-slot"));
  $("transcript").append(card);
  return card;
}

function setStatus(card, status, exitCode) {
  const failed = status === "failed" || (status === "completed" && exitCode);
  card.dataset.status = failed ? "failed" : status;
  let label = STATE_LABEL[status] || status;
  if (failed) label = exitCode ? `failed · exit ${exitCode}` : "failed";
  card.querySelector(".state").textContent = label;
  if (exitCode) {
    card.dataset.exitCode = String(exitCode);
    if (!card.querySelector(".exit")) card.querySelector(".title").after(el("span", "exit", " exit " + exitCode));
  }
}

function showDetail(card, call) {
  const detail = card.querySelector(".tool-detail");
  const frag = previewOf(call);
  if (frag.childNodes.length) detail.replaceChildren(frag);
}

// A `tool_call` or `tool_call_update` (ACP): announcement, progress, result.
export function onToolUpdate(u) {
  const card = toolCard(u.toolCallId);
  if (u.title) card.querySelector(".title").textContent = u.title;
  if (u.kind) card.dataset.kind = u.kind;
  if (u.sessionUpdate === "tool_call") showDetail(card, {kind: u.kind, rawInput: u.rawInput});
  const exitCode = u.rawOutput && typeof u.rawOutput.exitCode === "number" ? u.rawOutput.exitCode : 0;
  if (u.status) setStatus(card, u.status, exitCode);
  const content = u.content || [];
  const diffs = content.filter((c) => c.type === "diff");
  if (diffs.length) card.querySelector(".tool-detail").replaceChildren(...diffs.map(diffView));
  const text = content.filter((c) => c.type === "content" && c.content && c.content.type === "text").map((c) => c.content.text).join("\n");
  if (text) {
    const out = card.querySelector(".tool-out");
    out.hidden = false;
    out.querySelector(".output").textContent = text;
    const lines = text.replace(/\n$/, "").split("\n").length;
    if (card.dataset.status === "in_progress" || lines <= OUTPUT_OPEN_LINES || card.dataset.status === "failed") out.open = true;
    else if (!out.dataset.touched) out.open = false;
    out.querySelector("summary").textContent = `output · ${lines} line${lines === 1 ? "" : "s"}`;
    out.ontoggle = () => { out.dataset.touched = "1"; };
  }
  scrollDown();
}

// A `session/request_permission`: the card sits in its tool card, with the preview.
// A request of a session not on screen goes to the side panel, with its own preview.
export function showPermission(requestId, params, answer, inline = true) {
  const call = params.toolCall || {};
  const tool = inline ? toolCard(call.toolCallId || requestId) : detachedCard(call);
  if (call.title && !tool.querySelector(".title").textContent) tool.querySelector(".title").textContent = call.title;
  if (call.status && !tool.dataset.status) setStatus(tool, call.status, 0);
  showDetail(tool, call);
  tool.classList.add("asking");
  const card = el("div", "permission");
  card.dataset.requestId = requestId;
  card.tabIndex = 0;
  card.append(el("div", "perm-q", "Allow this call?"));
  const row = el("div", "perm-buttons");
  const byKind = new Map();
  for (const opt of params.options || []) {
    const key = Object.keys(KEYS).find((k) => KEYS[k] === opt.kind);
    const b = el("button", "", opt.name);
    b.dataset.optionId = opt.optionId;
    b.type = "button";
    if (key) b.append(el("kbd", "", key));
    b.onclick = () => answer(opt.optionId);
    byKind.set(opt.kind, opt.optionId);
    row.append(b);
  }
  card.append(row);
  card.onkeydown = (e) => {
    const kind = KEYS[e.key];
    if (!kind || e.ctrlKey || e.metaKey || e.altKey || !byKind.has(kind)) return;
    e.preventDefault();
    answer(byKind.get(kind));
  };
  tool.querySelector(".ask-slot").append(card);
  if (inline) {  // the side panel lists it; a click brings its card into focus
    const ref = el("li", "pending-ref", call.title || "A tool call");
    ref.dataset.requestId = requestId;
    ref.onclick = () => card.focus();
    const side = $("permissions");
    if (side.querySelector(".muted")) side.replaceChildren();
    side.append(ref);
  }
  const active = document.activeElement;
  const typing = active && active.id === "prompt" && active.value;
  if (!typing && !(active && active.classList && active.classList.contains("permission"))) card.focus();
  scrollDown();
}

function detachedCard(call) {
  const card = el("div", "tool detached");
  const head = el("div", "tool-head");
  head.append(el("span", "state", "waiting"), el("span", "title", call.title || "A tool call"));
  card.append(head, el("div", "tool-detail"), el("div", "ask-slot"));
  const side = $("permissions");
  if (side.querySelector(".muted")) side.replaceChildren();
  side.append(card);
  return card;
}

export function dropPermission(requestId) {
  const card = byData(".permission", "request-id", requestId);
  if (card) {
    const tool = card.closest(".tool");
    const hadFocus = card.contains(document.activeElement);
    card.remove();
    if (tool && tool.classList.contains("detached")) tool.remove();
    if (tool && !tool.querySelector(".permission")) tool.classList.remove("asking");
    const next = document.querySelector(".permission");
    if (hadFocus && next) next.focus();
  }
  const ref = byData(".pending-ref", "request-id", requestId);
  if (ref) ref.remove();
  if (!$("permissions").children.length) $("permissions").append(el("div", "muted", "none"));
}
