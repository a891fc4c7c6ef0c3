// Model text → safe DOM. Escape-first: marked renders markdown with raw HTML escaped (a
// model's "<script>" is shown as text), DOMPurify then sanitises what marked produced (no
// event handlers, no javascript: links, no frames or forms), and the result is a detached
// fragment — never innerHTML on the live page. Code blocks get colouring and a copy button.
import { Marked } from "../vendor/marked.esm.js";
import DOMPurify from "../vendor/purify.es.js";
import { copyText, el } from "../dom.js";
import { highlight, languageOf } from "./highlight.js";

const ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"};
export const escapeHtml = (s) => String(s).replace(/[&<>"']/g, (c) => ESCAPES[c]);

const marked = new Marked({gfm: true, breaks: false, async: false});
marked.use({
  renderer: {
    html(token) { return escapeHtml(token.text ?? token.raw ?? ""); },  // raw HTML is text
    // A task list keeps its boxes as characters: form inputs are sanitised away.
    checkbox({checked}) { return checked ? "☑ " : "☐ "; },
  },
});

const PURIFY = {
  USE_PROFILES: {html: true},
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe", "object", "embed", "svg", "math"],
  FORBID_ATTR: ["style", "id", "name", "srcset"],
  ALLOW_DATA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};

// Links open elsewhere and pass nothing on; only http(s) and mailto survive.
DOMPurify.addHook("afterSanitizeAttributes", (node) => {
  if (node.tagName === "A") {
    const href = node.getAttribute("href") || "";
    if (!/^(https?:|mailto:|#)/i.test(href)) node.removeAttribute("href");
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer");
  }
  if (node.tagName === "IMG") {
    const src = node.getAttribute("src") || "";
    if (!/^(https?:|data:image\/)/i.test(src)) node.removeAttribute("src");
  }
  if (node.hasAttribute && node.hasAttribute("class")) {
    const keep = [...node.classList].filter((c) => /^language-[\w+#.-]+$/.test(c));
    if (keep.length) node.setAttribute("class", keep.join(" ")); else node.removeAttribute("class");
  }
});

export function sanitisedFragment(text) {
  let html;
  try { html = marked.parse(text); } catch { html = "<pre>" + escapeHtml(text) + "</pre>"; }
  return DOMPurify.sanitize(html, PURIFY);
}

export function codeBlock(code, lang) {
  const box = el("div", "codeblock");
  const bar = el("div", "codebar");
  bar.append(el("span", "lang", lang || "text"));
  const copy = el("button", "copy", "copy");
  copy.type = "button";
  copy.onclick = async () => {
    copy.textContent = (await copyText(code)) ? "copied" : "copy failed";
    setTimeout(() => { copy.textContent = "copy"; }, 1500);
  };
  bar.append(copy);
  const pre = el("pre");
  const c = el("code");
  c.append(highlight(code, languageOf(lang)));
  pre.append(c);
  box.append(bar, pre);
  return box;
}

// Replace `container`'s children with the rendered markdown of `text`.
export function renderMarkdown(container, text) {
  const frag = sanitisedFragment(text);
  for (const code of frag.querySelectorAll("pre > code")) {
    const cls = [...code.classList].find((c) => c.startsWith("language-"));
    const lang = cls ? cls.slice("language-".length) : "";
    code.parentElement.replaceWith(codeBlock(code.textContent.replace(/\n$/, ""), lang));
  }
  container.replaceChildren(frag);
  container.classList.add("md");
}
