// The session's model picker (issue 33 item 3): the configured models and what the provider
// serves (`_agentd/models/list`), with context windows; Refresh asks the provider again.
import { $, el } from "./dom.js";

// 128000 → "128k", 1048576 → "1M": as model cards write context windows.
const windowText = (n) => n >= 1e6 ? `${+(n / 1e6).toFixed(1)}M` : `${Math.round(n / 1e3)}k`;

export class ModelPicker {
  constructor({rpc, session}) {
    this.rpc = rpc; this.session = session; this.current = null; this.models = [];
    $("model").onchange = () => this.choose($("model").value);
    $("models-refresh").onclick = () => this.load(true);
  }

  // The list from the server (refresh: the provider is asked first).
  async load(refresh = false) {
    const button = $("models-refresh");
    button.disabled = true;
    try {
      const res = await this.rpc("_agentd/models/list", {refresh});
      this.models = res.models || [];
      const served = this.models.filter((m) => m.source === "provider").length;
      $("model-note").textContent = res.error
        ? `The provider's list is unavailable (${res.error}): the configured models are offered.`
        : res.listing ? `${served} served by the provider` : "";
      this.render();
    } catch { /* shown by rpc */ } finally { button.disabled = false; }
  }

  // The session's model, from a snapshot, session/new's configOptions or config_option_update.
  setCurrent(model) {
    if (!model) return;
    this.current = model; $("model-box").hidden = false; this.render();
  }

  fromConfigOptions(options) {
    const option = (options || []).find((o) => o.id === "model");
    if (option) this.setCurrent(option.currentValue);
  }

  render() {
    const select = $("model");
    const models = this.models.some((m) => m.id === this.current) || !this.current
      ? this.models : [{id: this.current, name: this.current}, ...this.models];
    select.replaceChildren(...models.map((m) => {
      const opt = el("option", "", m.contextWindow ? `${m.name} · ${windowText(m.contextWindow)} context` : m.name);
      opt.value = m.id;
      if (m.source) opt.dataset.source = m.source;
      return opt;
    }));
    if (this.current) select.value = this.current;
    // The model the server confirmed (the select's value may still be a pending choice).
    select.dataset.current = this.current || "";
  }

  async choose(model) {
    const sessionId = this.session();
    if (!sessionId || model === this.current) return;
    try {
      const res = await this.rpc("session/set_config_option", {sessionId, configId: "model", value: model});
      this.fromConfigOptions(res.configOptions);
    } catch { this.render(); }  // refused: back to the session's model
  }

  reset() { this.current = null; $("model-box").hidden = true; }
}
