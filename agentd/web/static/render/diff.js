// Line diff of two texts (an ACP diff's oldText/newText) as a unified view with line numbers.
import { el } from "../dom.js";
import { highlight, languageOf } from "./highlight.js";

const CONTEXT = 3;
const MAX_CELLS = 4_000_000;  // beyond this the changed middle is shown as removed + added

function splitLines(text) {
  if (!text) return [];
  const lines = text.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  return lines;
}

// [{op: " " | "-" | "+", text, a, b}] with 1-based line numbers in old (a) and new (b).
export function lineDiff(oldText, newText) {
  const a = splitLines(oldText), b = splitLines(newText);
  let pre = 0;
  while (pre < a.length && pre < b.length && a[pre] === b[pre]) pre++;
  let suf = 0;
  while (suf < a.length - pre && suf < b.length - pre && a[a.length - 1 - suf] === b[b.length - 1 - suf]) suf++;
  const am = a.slice(pre, a.length - suf), bm = b.slice(pre, b.length - suf);
  const mid = [];
  if (am.length * bm.length <= MAX_CELLS) {
    // LCS table from the end, then walk forward.
    const n = am.length, m = bm.length, w = m + 1;
    const t = new Uint32Array((n + 1) * w);
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        t[i * w + j] = am[i] === bm[j] ? t[(i + 1) * w + j + 1] + 1 : Math.max(t[(i + 1) * w + j], t[i * w + j + 1]);
      }
    }
    let i = 0, j = 0;
    while (i < n || j < m) {
      if (i < n && j < m && am[i] === bm[j]) { mid.push([" ", am[i]]); i++; j++; }
      else if (i < n && (j === m || t[(i + 1) * w + j] >= t[i * w + j + 1])) { mid.push(["-", am[i]]); i++; }
      else { mid.push(["+", bm[j]]); j++; }
    }
  } else {
    for (const line of am) mid.push(["-", line]);
    for (const line of bm) mid.push(["+", line]);
  }
  const ops = [...a.slice(0, pre).map((l) => [" ", l]), ...mid, ...a.slice(a.length - suf).map((l) => [" ", l])];
  let ai = 0, bi = 0;
  return ops.map(([op, text]) => {
    if (op !== "+") ai++;
    if (op !== "-") bi++;
    return {op, text, a: op === "+" ? null : ai, b: op === "-" ? null : bi};
  });
}

// Runs of changed lines with CONTEXT lines around them; `null` marks skipped lines.
export function hunks(lines) {
  const keep = new Array(lines.length).fill(false);
  lines.forEach((l, i) => {
    if (l.op !== " ") for (let k = Math.max(0, i - CONTEXT); k <= Math.min(lines.length - 1, i + CONTEXT); k++) keep[k] = true;
  });
  const out = [];
  let skipped = 0;
  lines.forEach((l, i) => {
    if (keep[i]) { if (skipped) out.push({skipped}); skipped = 0; out.push(l); } else skipped++;
  });
  if (skipped) out.push({skipped});
  return out;
}

function row(cls, a, b, sign, text, family) {
  const tr = el("div", "dl " + cls);
  tr.append(el("span", "ln", a ?? ""), el("span", "ln", b ?? ""), el("span", "sign", sign));
  const code = el("span", "code");
  code.append(highlight(text, family));
  tr.append(code);
  return tr;
}

const LONG_NEW_FILE = 40;

// An ACP diff item as a DOM view: a unified diff, or the whole new file (folded when long).
export function diffView(item) {
  const family = languageOf(item.path);
  const box = el("div", "diff");
  box.dataset.path = item.path || "";
  const name = el("div", "diff-path", item.path || "");
  box.append(name);
  if (item.oldText === undefined || item.oldText === null) {
    const lines = splitLines(item.newText || "");
    box.classList.add("new-file");
    name.append(el("span", "badge", `new file · ${lines.length} line${lines.length === 1 ? "" : "s"}`));
    const body = el("div", "diff-body");
    lines.forEach((text, i) => body.append(row("add", null, i + 1, "+", text, family)));
    if (lines.length > LONG_NEW_FILE) {
      const fold = el("details", "fold");
      fold.append(el("summary", "", `show all ${lines.length} lines`), body);
      box.append(fold);
    } else box.append(body);
    return box;
  }
  const lines = lineDiff(item.oldText, item.newText || "");
  const added = lines.filter((l) => l.op === "+").length, removed = lines.filter((l) => l.op === "-").length;
  name.append(el("span", "badge", `+${added} −${removed}`));
  const body = el("div", "diff-body");
  for (const h of hunks(lines)) {
    if (h.skipped) body.append(el("div", "dl skip", `⋯ ${h.skipped} unchanged line${h.skipped === 1 ? "" : "s"}`));
    else body.append(row(h.op === "+" ? "add" : h.op === "-" ? "del" : "ctx", h.a, h.b, h.op, h.text, family));
  }
  box.append(body);
  return box;
}
