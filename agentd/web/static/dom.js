// Small DOM helpers. Text always goes in through textContent: nothing here parses HTML.
export const $ = (id) => document.getElementById(id);

export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = text;
  return e;
}

export function byData(selector, key, value) {
  return document.querySelector(`${selector}[data-${key}="${CSS.escape(value)}"]`);
}

export function scrollDown() {
  const t = $("transcript");
  if (t) t.scrollTop = t.scrollHeight;
}

// Copy `text`; the Clipboard API needs a secure context (loopback counts), else a selection.
export async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    try { await navigator.clipboard.writeText(text); return true; } catch { /* fall back */ }
  }
  const area = el("textarea"); area.value = text; document.body.append(area); area.select();
  const ok = document.execCommand("copy"); area.remove();
  return ok;
}

export function formatTokens(n) {
  if (n >= 1e6) return (n / 1e6).toFixed(2) + "M";
  if (n >= 1e4) return (n / 1e3).toFixed(1) + "k";
  return String(n);
}

export function formatCost(amount) {
  return "$" + (amount < 1 ? amount.toFixed(4) : amount.toFixed(2));
}
