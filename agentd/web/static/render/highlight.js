// A minimal syntax colouring: comments, strings, numbers and keywords of common languages.
// It builds text nodes and <span class="tok-…"> elements only — never HTML from the input.

const KEYWORDS = {
  c: "auto break case char const continue default do double else enum extern float for goto if int long register return short signed sizeof static struct switch typedef union unsigned void volatile while include define bool true false NULL nullptr class public private protected virtual template typename namespace using new delete this",
  py: "and as assert async await break class continue def del elif else except finally for from global if import in is lambda nonlocal not or pass raise return try while with yield None True False self match case",
  js: "async await break case catch class const continue debugger default delete do else export extends finally for from function if import in instanceof let new of return static super switch this throw try typeof var void while with yield true false null undefined interface type enum implements readonly",
  go: "break case chan const continue default defer else fallthrough for func go goto if import interface map package range return select struct switch type var nil true false",
  rust: "as async await break const continue crate else enum extern false fn for if impl in let loop match mod move mut pub ref return self Self static struct super trait true type unsafe use where while dyn Some None Ok Err",
  sh: "if then else elif fi case esac for while until do done in function return exit export local readonly echo cd set unset",
  sql: "select from where insert into values update set delete create table drop alter index join left right inner outer on group by order having limit offset as and or not null is in primary key foreign references",
  java: "abstract boolean break byte case catch char class const continue default do double else enum extends final finally float for if implements import instanceof int interface long new package private protected public return short static super switch this throw throws try void while true false null",
};
const FAMILY = {
  py: "py", python: "py", sh: "sh", bash: "sh", shell: "sh", zsh: "sh", console: "sh",
  js: "js", javascript: "js", mjs: "js", ts: "js", typescript: "js", tsx: "js", jsx: "js", json: "js",
  c: "c", h: "c", cpp: "c", cc: "c", hpp: "c", "c++": "c", cs: "java", java: "java", kt: "java", kotlin: "java",
  go: "go", rs: "rust", rust: "rust", sql: "sql", toml: "sh", yaml: "sh", yml: "sh", rb: "sh", ruby: "sh",
  css: "css", html: "html", xml: "html",
};
const HASH_COMMENTS = new Set(["py", "sh"]);

export function languageOf(nameOrLang) {
  if (!nameOrLang) return null;
  const key = String(nameOrLang).toLowerCase();
  const ext = key.includes(".") ? key.slice(key.lastIndexOf(".") + 1) : key;
  return FAMILY[ext] || null;
}

const cache = new Map();
function tokenizer(family) {
  if (cache.has(family)) return cache.get(family);
  const parts = [];
  if (HASH_COMMENTS.has(family)) parts.push("(#[^\\n]*)");
  else if (family === "sql") parts.push("(--[^\\n]*)");
  else if (family === "html") parts.push("(<!--[\\s\\S]*?-->)");
  else parts.push("(\\/\\/[^\\n]*|\\/\\*[\\s\\S]*?\\*\\/)");
  parts.push("(\"(?:[^\"\\\\\\n]|\\\\.)*\"|'(?:[^'\\\\\\n]|\\\\.)*'|`(?:[^`\\\\]|\\\\.)*`)");
  parts.push("(\\b\\d+(?:\\.\\d+)?(?:[eE][+-]?\\d+)?\\b|\\b0x[0-9a-fA-F]+\\b)");
  const words = KEYWORDS[family];
  parts.push(words ? `(\\b(?:${words.split(" ").join("|")})\\b)` : "(?!)");
  const re = new RegExp(parts.join("|"), family === "sql" ? "gi" : "g");
  cache.set(family, re);
  return re;
}

const CLASSES = [null, "tok-com", "tok-str", "tok-num", "tok-kw"];

// A fragment of `text` coloured for `family` (plain text when the language is unknown).
export function highlight(text, family) {
  const frag = document.createDocumentFragment();
  if (!family || text.length > 200_000) { frag.append(text); return frag; }
  const re = tokenizer(family);
  re.lastIndex = 0;
  let at = 0, m;
  while ((m = re.exec(text)) !== null) {
    if (m[0].length === 0) { re.lastIndex++; continue; }
    if (m.index > at) frag.append(text.slice(at, m.index));
    const group = m.findIndex((g, i) => i > 0 && g !== undefined);
    const span = document.createElement("span");
    span.className = CLASSES[group] || "";
    span.textContent = m[0];
    frag.append(span);
    at = m.index + m[0].length;
  }
  if (at < text.length) frag.append(text.slice(at));
  return frag;
}
