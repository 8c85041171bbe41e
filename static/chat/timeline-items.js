// The steps of a turn's timeline, one class per kind: thinking, a tool call, an error, sources.
// Each keeps its state apart from its DOM and builds its <li> on mount(), so that events can
// be applied before the turn is drawn.
import { h } from "./dom.js";
import { t, tf } from "./i18n.js";
import { argumentsPreview, foldedPre, prettyJson } from "./tool-payload.js";

const RETRY_COUNT = /\((\d+)\s*\/\s*(\d+)\)\s*$/;

function statusIcon(kind) {
  return h("span", { className: `status-icon ${kind}`, "aria-hidden": "true" });
}

export class ThinkingItem {
  constructor() {
    this.kind = "thinking";
    this.text = "";
    this.el = null;
    this.textNode = null;
  }
  append(delta) {
    this.text += delta;
    if (this.textNode) this.textNode.appendData(delta);
  }
  mount() {
    this.textNode = document.createTextNode(this.text);
    this.el = h(
      "li",
      { className: "tl-item tl-thinking" },
      statusIcon("thinking"),
      h("div", { className: "tl-body" }, h("div", { className: "tl-title", text: t("Thinking") }),
        h("div", { className: "thinking-text" }, this.textNode)),
    );
    return this.el;
  }
}

export class ToolItem {
  constructor(frame) {
    this.kind = "tool";
    this.toolCallId = frame.toolCallId;
    this.name = frame.toolName || "tool";
    this.arguments = frame.arguments ?? "";
    this.status = "running";
    this.result = null;
    this.durationMs = null;
    this.el = null;
  }
  // notRun: the call was denied or expired at approval, so the tool never ran: grey, not red.
  end(frame, { notRun = false } = {}) {
    this.status = notRun ? "not-run" : frame.isError ? "failed" : "done";
    this.result = typeof frame.result === "string" ? frame.result : JSON.stringify(frame.result);
    this.durationMs = typeof frame.durationMs === "number" ? frame.durationMs : null;
    if (frame.toolName) this.name = frame.toolName;
    if (this.el) this.update();
  }
  interrupt() {
    if (this.status === "running") {
      this.status = "stopped";
      if (this.el) this.update();
    }
  }
  metaText() {
    if (this.status === "running") return t("running…");
    if (this.status === "stopped") return t("not finished");
    if (this.status === "not-run") return t("not run");
    const took = this.durationMs === null ? "" : ` · ${this.durationMs < 1000 ? `${this.durationMs} ms` : `${(this.durationMs / 1000).toFixed(1)} s`}`;
    return (this.status === "failed" ? t("failed") : t("done")) + took;
  }
  mount() {
    this.icon = statusIcon(this.status);
    this.meta = h("span", { className: "tool-meta" });
    this.srStatus = h("span", { className: "visually-hidden" });
    this.details = h(
      "details",
      { className: "tool" },
      h("summary", {}, this.icon, h("span", { className: "tool-name", text: this.name }),
        h("span", { className: "tool-args-preview", text: argumentsPreview(this.arguments) }), this.meta, this.srStatus),
    );
    this.body = null;
    // Arguments and result are built when first opened: long histories stay light.
    this.details.addEventListener("toggle", () => {
      if (this.details.open) this.fillBody();
    });
    this.el = h("li", { className: "tl-item tl-tool", dataset: { toolCallId: this.toolCallId || "" } }, this.details);
    this.update();
    return this.el;
  }
  fillBody() {
    const body = h("div", { className: "tool-detail" },
      h("div", { className: "detail-label", text: t("Arguments") }),
      foldedPre(prettyJson(this.arguments || "{}"), "tool-pre"));
    if (this.result !== null) {
      const failed = this.status === "failed" || this.status === "not-run";
      body.append(h("div", { className: "detail-label", text: failed ? t("Error") : t("Result") }),
        foldedPre(prettyJson(this.result), `tool-pre${failed ? " is-error" : ""}`));
    } else {
      body.append(h("div", { className: "detail-label muted", text: t("Waiting for the result…") }));
    }
    if (this.body) this.body.replaceWith(body);
    else this.details.append(body);
    this.body = body;
  }
  update() {
    this.el.dataset.status = this.status;
    this.icon.className = `status-icon ${this.status === "not-run" ? "stopped" : this.status}`;
    this.meta.textContent = this.metaText();
    this.srStatus.textContent = ` (${this.metaText()})`;
    if (this.body) this.fillBody();
  }
}

export class ErrorItem {
  constructor(frame) {
    this.kind = "error";
    this.code = frame.code || "ERROR";
    const message = frame.message || frame.code || t("Error");
    // A retry's count is said once, by its badge: "(1/3)" leaves the message.
    this.retry = this.code === "LLM_CALL_FAILED" ? message.match(RETRY_COUNT) : null;
    this.message = this.retry ? message.slice(0, this.retry.index).trimEnd() : message;
    // INTERRUPTED's detail named the server's internal channel in older logs: never shown.
    this.detail = this.code === "INTERRUPTED" ? "" : frame.detail || "";
    // The run goes on after it: a retry, or a resume on another server (a warning, not a failure).
    this.isWarning = Boolean(this.retry) || (this.code === "INTERRUPTED" && frame.resumed === true);
    this.discarded = ""; // the text this failed attempt had streamed, taken out of the answer
    this.el = null;
  }
  get isCancel() {
    return this.code === "CANCELLED";
  }
  mount() {
    const title = h("div", { className: "tl-title" }, h("span", { text: this.message }));
    if (this.retry) {
      title.append(" ", h("span", { className: "badge badge-warn", text: tf("retry %s of %s", [this.retry[1], this.retry[2]]) }));
    }
    const body = h("div", { className: "tl-body" }, title,
      h("div", { className: "error-detail" }, h("code", { text: this.code }), this.detail ? ` ${this.detail}` : ""));
    if (this.discarded) {
      body.append(h("details", { className: "discarded" },
        h("summary", { text: t("Discarded partial answer") }), h("div", { className: "discarded-text", text: this.discarded })));
    }
    const kind = this.isCancel ? " is-cancel" : this.isWarning ? " is-warning" : "";
    this.el = h("li", { className: `tl-item tl-error${kind}`, role: "note" },
      statusIcon(this.isCancel ? "stopped" : this.isWarning ? "warn" : "error"), body);
    return this.el;
  }
}

export class ReferenceItem {
  constructor(frame) {
    this.kind = "reference";
    this.references = Array.isArray(frame.references) ? frame.references : [];
    this.el = null;
  }
  mount() {
    const list = h("ol", { className: "ref-list" });
    for (const ref of this.references) {
      const url = String(ref.url || "");
      const title = String(ref.title || url);
      const safe = /^https?:\/\//i.test(url);
      const link = safe
        ? h("a", { href: url, target: "_blank", rel: "noopener noreferrer", text: title })
        : h("span", { text: title });
      list.append(h("li", {}, link, ref.snippet ? h("div", { className: "ref-snippet", text: String(ref.snippet) }) : null));
    }
    this.el = h("li", { className: "tl-item tl-refs" }, statusIcon("refs"),
      h("div", { className: "tl-body" }, h("div", { className: "tl-title", text: t("Sources") }), list));
    return this.el;
  }
}

/** A tool call waiting for the user's approval (PROTOCOL section 7): the tool, its arguments
 * (inert text), Approve / Deny with an optional reason; once answered, from this tab or any
 * other, or expired, or its run ended, the card shows the outcome instead of the buttons. */
export class ApprovalItem {
  /** @param {object} frame  the approval_request
   *  @param {function} answer  (toolCallId, decision, reason) => true when the frame went out */
  constructor(frame, answer) {
    this.kind = "approval";
    this.toolCallId = frame.toolCallId;
    this.name = frame.toolName || "tool";
    this.arguments = frame.arguments ?? "";
    this.answer = answer;
    this.state = "pending"; // pending | approved | denied | expired | closed (run ended unanswered)
    this.reason = "";
    this.sending = false;
    this.el = null;
  }
  get pending() {
    return this.state === "pending";
  }
  settle(frame) {
    this.state = ["approved", "denied", "expired"].includes(frame.decision) ? frame.decision : "denied";
    this.reason = String(frame.reason ?? "");
    if (this.el) this.update();
  }
  /** The run ended without a result for it (a log cut short): nothing can answer it any more. */
  close() {
    if (!this.pending) return;
    this.state = "closed";
    if (this.el) this.update();
  }
  outcomeText() {
    const why = this.reason ? `: ${this.reason}` : "";
    if (this.state === "approved") return t("Approved") + why;
    if (this.state === "denied") return t("Denied") + why;
    if (this.state === "expired") return t("Expired: nobody answered in time") + (this.reason && !this.reason.startsWith("no answer") ? ` (${this.reason})` : "");
    return t("Not answered");
  }
  send(decision) {
    if (!this.pending || this.sending) return;
    this.sending = this.answer(this.toolCallId, decision, this.reasonInput.value.trim());
    this.update();
  }
  mount() {
    this.icon = statusIcon("approval");
    this.reasonInput = h("input", { type: "text", className: "approval-reason", maxlength: "1000",
      placeholder: t("Reason (optional)"), "aria-label": t("Reason (optional)") });
    this.approveButton = h("button", { type: "button", className: "btn btn-small btn-primary", dataset: { action: "approve" }, text: t("Approve") });
    this.denyButton = h("button", { type: "button", className: "btn btn-small", dataset: { action: "deny" }, text: t("Deny") });
    this.approveButton.addEventListener("click", () => this.send("approve"));
    this.denyButton.addEventListener("click", () => this.send("deny"));
    this.reasonInput.addEventListener("keydown", (event) => {
      if (event.key === "Enter") this.send("deny"); // a reason typed is a reason to deny
    });
    this.form = h("div", { className: "approval-actions" }, this.reasonInput, this.denyButton, this.approveButton);
    this.outcome = h("div", { className: "approval-outcome", role: "status" });
    this.title = h("div", { className: "tl-title" });
    this.el = h("li", { className: "tl-item tl-approval", dataset: { toolCallId: this.toolCallId || "" } }, this.icon,
      h("div", { className: "tl-body" }, this.title,
        foldedPre(prettyJson(this.arguments || "{}"), "tool-pre approval-args"), this.form, this.outcome));
    this.update();
    return this.el;
  }
  update() {
    this.el.dataset.state = this.state;
    this.icon.className = `status-icon ${{ pending: "approval", approved: "done" }[this.state] || "stopped"}`;
    this.title.replaceChildren(
      h("span", { text: this.pending ? t("Approval needed to run") : t("Approval for") }), " ",
      h("span", { className: "tool-name", text: this.name }));
    this.form.hidden = !this.pending;
    for (const control of [this.reasonInput, this.approveButton, this.denyButton]) control.disabled = this.sending;
    this.outcome.hidden = this.pending;
    this.outcome.textContent = this.pending ? "" : this.outcomeText();
  }
}
