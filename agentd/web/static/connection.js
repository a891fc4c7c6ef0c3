// The page's one WebSocket to /acp, kept alive: JSON-RPC requests and notifications, and a
// reconnect with backoff after a network drop or a server restart. `onReady(reconnected)`
// runs after every `initialize` (the app re-attaches its session from the last seq there);
// requests sent with `{retry: true}` (idempotent ones, e.g. an enqueue under its requestId)
// are sent again after a reconnect instead of failing. A request the server refuses for now
// (`retryAfter`: an overloaded database, the rate limit) is sent again after that wait.

const CAPABILITIES = {session: {compaction: {}, notices: {}}};
const BACKOFF_MS = [200, 400, 800, 1600, 3200, 5000];
const TOKEN_REVOKED = 4401;  // agentd/transport/revocation.py
export const CONNECTION_LOST = "connection lost";

const OPT_IN = {agentd: {notifications: ["*"]}};
// The rule of agentd/transport/retry_after.py (the stdio bridge and `agentd chat` follow it too).
const MAX_REFUSAL_RETRIES = 8;
const MAX_REFUSAL_WAIT_S = 10;

// Seconds to wait before sending a refused request again, or -1: the error is the answer.
export function retryWait(error, retries) {
  const data = error && error.data;
  if (retries >= MAX_REFUSAL_RETRIES || !data || typeof data !== "object" || Array.isArray(data)) return -1;
  const wait = data.retryAfter;
  if (data.retryable === false || typeof wait !== "number" || Number.isNaN(wait)) return -1;
  return Math.min(Math.max(wait, 0), MAX_REFUSAL_WAIT_S);
}

export class Connection {
  // checkToken(token) -> {ok, unreachable?}: asked when a socket with a token is refused.
  constructor({token, onReady, onMessage, onStatus, onAuthLost, checkToken}) {
    this.token = token || ""; this.checkToken = checkToken;
    this.onReady = onReady; this.onMessage = onMessage; this.onStatus = onStatus; this.onAuthLost = onAuthLost;
    this.ws = null; this.nextId = 1; this.pending = new Map(); this.retries = [];
    this.attempt = 0; this.everReady = false; this.stopped = false; this.timer = 0;
    this.info = null; this.generation = 0;  // how many times the socket was (re)opened
  }

  start() { this.stopped = false; this._open(); }

  stop() {
    this.stopped = true; clearTimeout(this.timer);
    if (this.ws) { this.ws.onclose = null; this.ws.close(); this.ws = null; }
    this._failPending();
  }

  get open() { return !!this.ws && this.ws.readyState === WebSocket.OPEN && this.ready; }

  _open() {
    const url = location.origin.replace(/^http/, "ws") + "/acp";
    const ws = this.token ? new WebSocket(url, ["acp", "agentd.bearer." + this.token]) : new WebSocket(url);
    this.ws = ws; this.ready = false;
    let opened = false;
    ws.onopen = () => { opened = true; this._initialize(ws); };
    ws.onmessage = (ev) => this._receive(JSON.parse(ev.data));
    ws.onclose = (ev) => {
      if (this.ws !== ws) return;
      this.ws = null; this.ready = false;
      this._failPending();
      if (this.stopped) return;
      if (ev.code === TOKEN_REVOKED) { this.stopped = true; this.onAuthLost(); return; }
      if (!opened && this.token && this.checkToken) this._recheck();
      const wait = BACKOFF_MS[Math.min(this.attempt++, BACKOFF_MS.length - 1)];
      this.onStatus("reconnecting", `connection lost — reconnecting in ${(wait / 1000).toFixed(1)} s`);
      this.timer = setTimeout(() => this._open(), wait);
    };
  }

  // Refused at the handshake with a token: revoked while the page was away? (A refused
  // handshake looks like a network failure to a page.)
  async _recheck() {
    const check = await this.checkToken(this.token);
    if (check.ok || check.unreachable || this.stopped) return;
    this.stopped = true; clearTimeout(this.timer);
    this.onAuthLost();
  }

  async _initialize(ws) {
    let init;
    try {
      // agentd's own notifications (events, snapshots, resyncs) come only to clients that ask.
      init = await this._request("initialize", {protocolVersion: 1, clientCapabilities: CAPABILITIES, _meta: OPT_IN});
    } catch { return; }  // closed meanwhile: onclose retries
    if (this.ws !== ws) return;
    this.attempt = 0; this.ready = true; this.info = init.agentInfo; this.generation += 1;
    const reconnected = this.everReady; this.everReady = true;
    this.onStatus("connected", "connected to " + init.agentInfo.name + " " + init.agentInfo.version);
    try { await this.onReady(reconnected); } catch { /* shown by the app */ }
    const again = this.retries; this.retries = [];
    for (const r of again) this._patiently(r.method, r.params).then(r.resolve, (e) => this._retryOrFail(r, e));
  }

  _receive(msg) {
    if (msg.id !== undefined && !msg.method) {
      const waiter = this.pending.get(msg.id); this.pending.delete(msg.id);
      if (!waiter) return;
      if (msg.error) waiter.reject(msg.error); else waiter.resolve(msg.result);
      return;
    }
    this.onMessage(msg);
  }

  _failPending() {
    const waiting = [...this.pending.values()]; this.pending.clear();
    for (const w of waiting) w.reject({message: CONNECTION_LOST, lost: true});
  }

  _request(method, params) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return Promise.reject({message: CONNECTION_LOST, lost: true});
    const id = this.nextId++;
    this.ws.send(JSON.stringify({jsonrpc: "2.0", id, method, params}));
    return new Promise((resolve, reject) => this.pending.set(id, {resolve, reject}));
  }

  // `_request`, sent again after the wait a refusal names, a bounded number of times.
  async _patiently(method, params) {
    for (let tries = 0; ; tries++) {
      try { return await this._request(method, params); } catch (e) {
        const wait = retryWait(e, tries);
        if (wait < 0 || this.stopped) throw e;
        await new Promise((resolve) => setTimeout(resolve, wait * 1000));
      }
    }
  }

  _retryOrFail(r, e) {
    if (e && e.lost && !this.stopped) this.retries.push(r); else r.reject(e);
  }

  // A request; `retry`: sent again after a reconnect when the connection drops first.
  rpc(method, params, {retry = false} = {}) {
    if (!retry) return this.ready ? this._patiently(method, params) : Promise.reject({message: CONNECTION_LOST, lost: true});
    return new Promise((resolve, reject) => {
      const r = {method, params, resolve, reject};
      if (!this.ready) { this.retries.push(r); return; }
      this._patiently(method, params).then(resolve, (e) => this._retryOrFail(r, e));
    });
  }

  notify(method, params) { this.send({jsonrpc: "2.0", method, params}); }

  send(obj) { if (this.ws && this.ws.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(obj)); }
}
