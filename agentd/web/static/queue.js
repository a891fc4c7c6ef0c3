// The session's prompt queue (docs/protocol.md "queue_update"; SPEC R-S3): shown from the
// attach snapshot and kept current by the `queue_update` deltas. Each entry can be edited in
// place — the entry is held while the editor is open (a held front is not started) and
// released after — dragged (or moved up) to reorder, removed, or interjected into the
// running turn; "Combine" merges the queued plain prompts. Every change names the version
// it saw: when another client changed the entry first, the server refuses (`stale_version`)
// and the editor shows both texts to choose from.
import { $, el } from "./dom.js";

const RECENT = 64;  // texts of entries that left the queue, for the transcript (bounded)

function entryOf(raw) {
  return {id: raw.id || raw.promptId, version: raw.version || 1, kind: raw.kind || "prompt", text: raw.text || "", held: !!raw.held};
}

export class QueueView {
  // rpc(method, params) -> Promise; session() -> the session on screen; interjected(entry):
  // an entry moved into the running turn.
  constructor({rpc, session, interjected}) {
    this.rpc = rpc; this.session = session; this.interjected = interjected;
    this.entries = []; this.editing = new Map(); this.recent = new Map(); this.dragId = null;
    $("queue-combine").onclick = () => this.op("combine", {});
  }

  reset() {
    this.releaseAll();
    this.entries = []; this.note("");
    this.render();
  }

  // Another session: let go of what this page holds.
  releaseAll() {
    for (const params of this.takeHolds()) this.rpc("_agentd/queue/release", params).catch(() => {});
  }

  // The holds this page has, forgotten here ([{sessionId, id}]), for the caller to release.
  takeHolds() {
    const holds = [...this.editing].map(([id, st]) => ({sessionId: st.session, id}));
    this.editing.clear();
    return holds;
  }

  // The whole queue (snapshot: `[{promptId, kind, version, text}]`).
  replace(queue) {
    this.entries = (queue || []).map(entryOf);
    this.render();
  }

  // One `queue_update` event's changes, applied in order.
  apply(ev) {
    let q = this.entries.slice();
    for (const c of ev.changes || []) {
      if (c.change === "removed") {
        const gone = q.find((e) => e.id === c.id);
        if (gone) this.remember(gone);
        if (gone && c.reason === "interjected") this.interjected(gone);
        q = q.filter((e) => e.id !== c.id);
        if (this.editing.has(c.id)) {
          this.editing.delete(c.id);
          this.note(c.reason === "started" ? "The prompt you were editing has started." : "The prompt you were editing left the queue.");
        }
      } else if (c.change === "added") {
        q = q.filter((e) => e.id !== c.entry.id);
        q.splice(Math.min(c.index, q.length), 0, entryOf(c.entry));
      } else if (c.change === "updated") {
        q = q.map((e) => e.id === c.entry.id ? {...e, version: c.entry.version || e.version, kind: c.entry.kind || e.kind, held: !!c.entry.held, ...("text" in c.entry ? {text: c.entry.text} : {})} : e);
      } else if (c.change === "moved") {
        const byId = new Map(q.map((e) => [e.id, e]));
        const ordered = c.order.map((id) => byId.get(id)).filter(Boolean);
        for (const id of c.order) byId.delete(id);
        q = ordered.concat([...byId.values()]);
      }
    }
    this.entries = q;
    this.render();
  }

  remember(entry) {
    this.recent.set(entry.id, entry.text);
    if (this.recent.size > RECENT) this.recent.delete(this.recent.keys().next().value);
  }

  // The latest text of a prompt that is (or was) queued.
  textOf(id) {
    const e = this.entries.find((x) => x.id === id);
    return e ? e.text : this.recent.get(id);
  }

  note(text) { $("queue-note").textContent = text; }

  async op(name, params) {
    const sessionId = this.session();
    if (!sessionId) return null;
    let res;
    try { res = await this.rpc("_agentd/queue/" + name, {sessionId, ...params}); } catch (e) { this.note(e.message || String(e)); return null; }
    if (!res.applied && res.reason && res.reason !== "stale_version") this.note(REFUSED[res.reason] || res.reason);
    else this.note("");
    return res;
  }

  // ---- editing in place (held while open) ----
  async startEdit(entry) {
    if (this.editing.has(entry.id)) return;
    const res = await this.op("hold", {id: entry.id});
    if (!res || !res.applied) return;
    const now = (res.queue || []).map(entryOf).find((e) => e.id === entry.id) || entry;
    this.editing.set(entry.id, {session: this.session(), version: now.version, draft: now.text, conflict: null, li: null});
    this.render();
    const box = document.querySelector(`#queue li[data-prompt-id="${CSS.escape(entry.id)}"] textarea`);
    if (box) { box.focus(); box.setSelectionRange(box.value.length, box.value.length); }
  }

  async save(id, version) {
    const st = this.editing.get(id);
    if (!st) return;
    const res = await this.op("edit", {id, expectedVersion: version, text: st.draft});
    if (!res) return;
    if (res.applied || res.reason === "unchanged") return this.finish(id);
    if (res.reason === "stale_version") {
      const theirs = (res.queue || []).map(entryOf).find((e) => e.id === id);
      if (!theirs) { this.editing.delete(id); this.note("The prompt left the queue."); this.render(); return; }
      st.conflict = {text: theirs.text, version: theirs.version};
      this.render();
    } else if (res.reason === "not_found") { this.editing.delete(id); this.render(); }
  }

  async finish(id) {
    this.editing.delete(id);
    this.render();
    await this.op("release", {id});
  }

  // ---- reordering ----
  move(id, beforeId) {
    const order = this.entries.map((e) => e.id).filter((x) => x !== id);
    const at = beforeId === null ? order.length : order.indexOf(beforeId);
    order.splice(at < 0 ? order.length : at, 0, id);
    if (order.join("\n") === this.entries.map((e) => e.id).join("\n")) return;
    return this.op("move", {order});
  }

  render() {
    const ul = $("queue");
    const rows = this.entries.map((e) => this.editing.has(e.id) ? this.editorRow(e) : this.row(e));
    ul.replaceChildren(...rows);
    $("queue-combine").disabled = this.entries.length < 2;
  }

  row(e) {
    const li = el("li", "q-entry");
    li.dataset.promptId = e.id; li.dataset.version = String(e.version); li.dataset.kind = e.kind;
    if (e.held) li.classList.add("held");
    li.draggable = true;
    const text = el("span", "q-text", e.text);
    text.title = "double-click to edit";
    text.ondblclick = () => this.startEdit(e);
    const tools = el("span", "q-tools");
    const button = (cls, label, title, fn) => { const b = el("button", "small " + cls, label); b.type = "button"; b.title = title; b.onclick = fn; tools.append(b); };
    button("edit", "edit", "Edit this prompt (it waits while you edit)", () => this.startEdit(e));
    button("up", "↑", "Move up", () => { const i = this.entries.findIndex((x) => x.id === e.id); if (i > 0) this.move(e.id, this.entries[i - 1].id); });
    button("interject", "interject", "Add it to the running turn now", () => this.op("interject", {id: e.id}));
    button("remove", "remove", "Remove from the queue", () => this.op("remove", {id: e.id, expectedVersion: e.version}));
    li.append(text);
    if (e.held) li.append(el("span", "q-held", "held"));
    li.append(tools);
    li.ondragstart = (ev) => { this.dragId = e.id; ev.dataTransfer.effectAllowed = "move"; ev.dataTransfer.setData("text/plain", e.id); li.classList.add("dragging"); };
    li.ondragend = () => { this.dragId = null; li.classList.remove("dragging"); };
    li.ondragover = (ev) => { if (this.dragId && this.dragId !== e.id) { ev.preventDefault(); li.classList.add("drop-target"); } };
    li.ondragleave = () => li.classList.remove("drop-target");
    li.ondrop = (ev) => {
      ev.preventDefault(); li.classList.remove("drop-target");
      const id = this.dragId || ev.dataTransfer.getData("text/plain");
      if (!id || id === e.id) return;
      const from = this.entries.findIndex((x) => x.id === id), to = this.entries.findIndex((x) => x.id === e.id);
      // Dropped on an entry below: it goes after that one; above: before it.
      this.move(id, from < to ? (this.entries[to + 1] || {id: null}).id : e.id);
    };
    return li;
  }

  editorRow(e) {
    const st = this.editing.get(e.id);
    if (st.li && !st.conflict && !st.li.querySelector(".conflict")) { st.li.dataset.version = String(e.version); return st.li; }
    const li = el("li", "q-entry editing");
    li.dataset.promptId = e.id; li.dataset.version = String(e.version);
    const area = el("textarea", "q-editor");
    area.value = st.draft; area.rows = 3;
    area.oninput = () => { st.draft = area.value; };
    area.onkeydown = (ev) => {
      if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); this.save(e.id, st.conflict ? st.conflict.version : st.version); }
      if (ev.key === "Escape") { ev.preventDefault(); this.finish(e.id); }
    };
    li.append(area);
    const tools = el("div", "q-tools");
    if (st.conflict) {
      const box = el("div", "conflict");
      box.setAttribute("role", "alert");
      box.append(el("strong", "", "Another client changed this prompt while you were editing it."));
      box.append(el("div", "muted", "Their version:"), el("div", "theirs", st.conflict.text));
      li.append(box);
      const mine = el("button", "small use-mine", "Save mine"); mine.type = "button";
      mine.onclick = () => { const v = st.conflict.version; st.conflict = null; st.li = null; this.save(e.id, v); };
      const theirs = el("button", "small keep-theirs", "Keep theirs"); theirs.type = "button";
      theirs.onclick = () => this.finish(e.id);
      tools.append(mine, theirs);
    } else {
      const save = el("button", "small save", "Save"); save.type = "button";
      save.onclick = () => this.save(e.id, st.version);
      const cancel = el("button", "small discard", "Cancel"); cancel.type = "button";
      cancel.onclick = () => this.finish(e.id);
      tools.append(save, cancel, el("span", "muted", " held while you edit"));
    }
    li.append(tools);
    st.li = st.conflict ? null : li;
    return li;
  }
}

const REFUSED = {
  not_found: "That prompt is no longer queued.",
  not_editable: "That entry cannot be edited.",
  nothing_to_combine: "Nothing to combine: only consecutive plain prompts merge.",
  not_held: "That prompt was not held.",
  not_plain: "Only a plain prompt can be interjected.",
  unchanged: "",
};
