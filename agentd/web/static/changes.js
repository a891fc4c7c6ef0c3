// What the session changed (issue 33): the side panel's "Changes" — every file the session's
// tools changed, its diff from before the session, and a Revert button per file — and the
// session's Export (a .jsonl download) and Import (a file picked here becomes a session).
import { $, el } from "./dom.js";

let api = null;  // {rpc(method, params) -> Promise, current() -> sessionId, open(sessionId)}
let generation = 0;

export function initChanges(options) {
  api = options;
  $("changes-refresh").onclick = () => refreshChanges();
  $("session-export").onclick = () => exportSession();
  $("session-import").onchange = (e) => importSession(e.target);
}

function note(text, state) {
  const n = $("changes-note");
  n.textContent = text || ""; n.dataset.state = state || "";
}

// The list as the server has it now; only the latest refresh started is shown.
export async function refreshChanges() {
  const sessionId = api.current();
  const mine = ++generation;
  const box = $("changes");
  if (!sessionId) { box.replaceChildren(el("li", "muted", "no session")); return; }
  let res;
  try {
    res = await api.rpc("_agentd/session/changes", {sessionId});
  } catch (e) {
    if (mine === generation) note("Could not read the changes: " + e.message, "error");
    return;
  }
  if (mine !== generation || sessionId !== api.current()) return;
  render(res);
}

export function resetChanges() {
  generation++;
  $("changes").replaceChildren(el("li", "muted", "no changes"));
  note("");
}

function render(res) {
  const box = $("changes");
  if (!res.files.length) { box.replaceChildren(el("li", "muted", "no changes")); return; }
  box.replaceChildren(...res.files.map(fileItem));
  if (res.omitted) box.append(el("li", "muted", `… and ${res.omitted} more`));
}

function fileItem(f) {
  const li = el("li", "change");
  li.dataset.path = f.path; li.dataset.status = f.status; li.dataset.source = f.source;
  const head = el("div", "change-head");
  head.append(el("span", "change-path", f.path), el("span", "change-status " + f.status, f.status));
  if (f.source === "git") head.append(el("span", "muted", " (git)"));
  if (f.revertible) {
    const b = el("button", "small change-revert", "Revert");
    b.type = "button"; b.title = "Put this file back as it was before the session";
    b.onclick = () => revert(f.path, b);
    head.append(b);
  }
  li.append(head);
  if (f.binary) li.append(el("div", "muted", "binary file"));
  else if (f.diff) {
    const d = el("details", "change-diff");
    d.append(el("summary", null, "diff"), diffBlock(f.diff));
    li.append(d);
  }
  return li;
}

// Each line of the unified diff on its own, coloured by its first character.
function diffBlock(text) {
  const pre = el("pre", "change-lines");
  for (const line of text.replace(/\n$/, "").split("\n")) {
    const cls = line.startsWith("+") && !line.startsWith("+++") ? "add"
      : line.startsWith("-") && !line.startsWith("---") ? "del" : line.startsWith("@@") ? "hunk" : null;
    pre.append(el("span", cls ? "cl " + cls : "cl", line + "\n"));
  }
  return pre;
}

async function revert(path, button, force = false) {
  const sessionId = api.current();
  button.disabled = true;
  try {
    await api.rpc("_agentd/session/revert_file", {sessionId, path, force});
    note(`Reverted ${path}.`, "done");
  } catch (e) {
    const reason = ((e.data || {}).reason) || "";
    if (reason === "changed_outside" && !force
        && confirm(`${path} changed outside the session since it last wrote it. Revert it anyway?`)) {
      return revert(path, button, true);
    }
    note(e.message, "error");
  } finally {
    button.disabled = false;
  }
  return refreshChanges();
}

async function exportSession() {
  const sessionId = api.current();
  if (!sessionId) return;
  try {
    const res = await api.rpc("_agentd/session/export", {sessionId});
    const link = el("a");
    link.href = URL.createObjectURL(new Blob([res.jsonl], {type: "application/jsonl"}));
    link.download = sessionId + ".jsonl";
    document.body.append(link); link.click(); link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 0);
    note(`Exported ${sessionId}.`, "done");
  } catch (e) {
    note("Could not export: " + e.message, "error");
  }
}

async function importSession(input) {
  const file = input.files && input.files[0];
  input.value = "";
  if (!file) return;
  const status = $("import-status");
  try {
    const res = await api.rpc("_agentd/session/import", {jsonl: await file.text()});
    status.dataset.state = "done";
    status.textContent = `Imported as ${res.sessionId} (${res.events} events).`;
    await api.open(res.sessionId);
  } catch (e) {
    status.dataset.state = "error";
    status.textContent = "Could not import: " + e.message;
  }
}
