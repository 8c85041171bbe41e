// The context gauge by the composer (docs/protocol.md, "Compaction"): how much of the agent's
// context the next message starts from, from the newest shown turn's `complete.context`. Full
// turns are summarized by the server before they overflow it; the gauge says how near that is.
import { tf } from "./i18n.js";

export class ContextGauge {
  constructor(el) {
    this.el = el;
    this.fill = el.querySelector(".gauge-fill");
    this.label = el.querySelector(".gauge-label");
  }

  /** `context`: {tokens, limit}, or null to hide the gauge (a draft, a conversation without one). */
  show(context) {
    const limit = Number(context?.limit);
    if (!(limit > 0)) {
      this.el.hidden = true;
      return;
    }
    const tokens = Math.max(0, Number(context.tokens) || 0);
    const percent = Math.min(100, Math.round((tokens / limit) * 100));
    const lang = document.documentElement.lang || undefined;
    const format = new Intl.NumberFormat(lang);
    this.el.setAttribute("aria-valuenow", String(percent));
    this.el.setAttribute("aria-valuetext", tf("%s of %s tokens of context", [format.format(tokens), format.format(limit)]));
    this.el.title = this.el.getAttribute("aria-valuetext");
    this.fill.style.width = `${percent}%`;
    this.el.dataset.level = percent >= 80 ? "high" : percent >= 50 ? "mid" : "low";
    this.label.textContent = `${percent}%`;
    this.el.hidden = false;
  }
}
