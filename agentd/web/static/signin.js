// Sign-in for servers that need a token (AGENTD_AUTH=token). The token lives in this tab's
// sessionStorage only; one given as `?token=` is moved there and taken out of the address
// bar at once. `POST /auth/check` says whether a token is needed and whether this one is
// good (always 200: a wrong token is an answer here, not a failed request).
import { $ } from "./dom.js";

const KEY = "agentd.token";
export const REVOKED = "revoked";

export function takeToken() {
  const url = new URL(location.href);
  const given = url.searchParams.get("token");
  if (given !== null) {
    url.searchParams.delete("token");
    history.replaceState(history.state, "", url.pathname + url.search + url.hash);
    if (given) sessionStorage.setItem(KEY, given);
  }
  localStorage.removeItem(KEY);  // where older versions of this page kept it
  return sessionStorage.getItem(KEY) || "";
}

export function forgetToken() { sessionStorage.removeItem(KEY); }

// {required, ok, detail?}; a server that cannot be reached counts as "try the socket".
export async function checkToken(token) {
  try {
    const resp = await fetch("/auth/check", {
      method: "POST", cache: "no-store",
      headers: token ? {Authorization: "Bearer " + token} : {},
    });
    return await resp.json();
  } catch {
    return {required: false, ok: true, unreachable: true};
  }
}

function explain(detail) {
  if (!detail) return "";
  if (detail === REVOKED) return "Your token was revoked while you were signed in: sign in with another.";
  if (/invalid|revoked/.test(detail)) return "That token was not accepted: it is unknown or has been revoked.";
  return detail;
}

// Shows the sign-in screen until `accept(token)` resolves; `detail`: why (a refused token).
export function signIn(detail) {
  const box = $("signin"), input = $("signin-token"), error = $("signin-error");
  box.hidden = false; document.body.classList.add("signed-out");
  error.textContent = explain(detail);
  input.value = ""; input.focus();
  return new Promise((resolve) => {
    const go = async () => {
      const token = input.value.trim();
      if (!token) { error.textContent = "Enter a token."; return; }
      $("signin-go").disabled = true; error.textContent = "checking…";
      const check = await checkToken(token);
      $("signin-go").disabled = false;
      if (!check.ok) { error.textContent = explain(check.detail) || "That token was not accepted."; input.select(); return; }
      sessionStorage.setItem(KEY, token);
      error.textContent = ""; input.value = "";
      box.hidden = true; document.body.classList.remove("signed-out");
      resolve(token);
    };
    $("signin-go").onclick = go;
    input.onkeydown = (e) => { if (e.key === "Enter") { e.preventDefault(); go(); } };
  });
}
