// The steps of a turn's timeline, one class per kind: thinking, a tool call, an error, sources,
// a note the user sent the running agent.
// Each keeps its state apart from its DOM and builds its <li> on mount(), so that events can
// be applied before the turn is drawn.
import { h } from "./dom.js";
import { icon } from "./icons.js";
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
    this.child = null; // the child run of a delegate call (child-run.js)
    this.el = null;
  }
  /** A delegate call's child run: drawn in this card, which is open while the child works and
   * stays open when it failed. */
  attachChild(child) {
    this.child = child;
    child.onEnd = (live) => {
      if (this.el && live) this.details.open = child.hasError;
    };
    if (this.el) this.mountChild();
  }
  mountChild() {
    this.details.querySelector(":scope > summary").after(this.child.mount());
    this.details.open = this.child.running || this.child.hasError;
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
    if (this.child) this.mountChild();
    this.update();
    return this.el;
  }
  fillBody() {
    if (this.child) return; // the child run shows the task, its steps and its answer
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

/** What an error means to the person reading the timeline, by its code (docs/protocol.md, "Events"):
 * the row's title, in the page's language. The code itself is only a badge beside it. */
function errorTitle(item, message) {
  switch (item.code) {
    case "LLM_CALL_FAILED":
      return item.retry ? t("The model did not answer; trying again") : t("The model did not answer");
    case "MAX_ITERATIONS":
      return t("Stopped: the agent reached its limit of model calls without a final answer");
    case "CANCELLED":
      return t("Stopped at your request");
    case "INTERRUPTED":
      return item.isWarning ? t("The server restarted; the run went on where it was") : t("The server stopped during this run");
    case "INVALID_OUTPUT":
      return t("The answer did not have the form that was asked for");
    case "AGENT_ERROR":
      return t("The agent failed");
    default:
      return message && message !== item.code ? message : t("Something went wrong.");
  }
}

export class ErrorItem {
  constructor(frame) {
    this.kind = "error";
    this.code = frame.code || "ERROR";
    const message = frame.message || "";
    // A retry's count is said once, by its badge: "(1/3)" leaves the message.
    this.retry = this.code === "LLM_CALL_FAILED" ? message.match(RETRY_COUNT) : null;
    // The run goes on after it: a retry, or a resume on another server (a warning, not a failure).
    this.isWarning = Boolean(this.retry) || (this.code === "INTERRUPTED" && frame.resumed === true);
    this.title = errorTitle(this, message);
    // Under the title, what the server said of the cause: a failed model call's message names it
    // (a retry's only says "retrying", which the title does); the others' messages are the
    // title's words in English. INTERRUPTED's detail named the server's internal channel in
    // older logs: never shown.
    const said = this.code === "LLM_CALL_FAILED" && !this.retry ? message : "";
    this.detail = [said, this.code === "INTERRUPTED" ? "" : frame.detail || ""].filter(Boolean).join(" · ");
    this.discarded = ""; // the text this failed attempt had streamed, taken out of the answer
    this.el = null;
  }
  get isCancel() {
    return this.code === "CANCELLED";
  }
  mount() {
    const title = h("div", { className: "tl-title" }, h("span", { text: this.title }));
    if (this.retry) {
      title.append(" ", h("span", { className: "badge badge-warn", text: tf("retry %s of %s", [this.retry[1], this.retry[2]]) }));
    }
    title.append(" ", h("code", { className: "code-badge", text: this.code }));
    const body = h("div", { className: "tl-body" }, title);
    if (this.detail) body.append(h("div", { className: "error-detail", text: this.detail }));
    if (this.discarded) {
      body.append(h("details", { className: "discarded" },
        h("summary", { text: t("Discarded partial answer") }), h("div", { className: "discarded-text", text: this.discarded })));
    }
    const kind = this.isCancel ? " is-cancel" : this.isWarning ? " is-warning" : "";
    // A row of the timeline's list like the others (a list's children are list items).
    this.el = h("li", { className: `tl-item tl-error${kind}` },
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

/** A tool call waiting for the user's approval (docs/protocol.md, "Approvals"): the tool, its arguments
 * (inert text), Approve / Deny with an optional reason, disabled with the reason said while the
 * socket is down; once answered, from this tab or any other, or expired, or its run ended, the
 * card shows the outcome instead of the buttons. */
export class ApprovalItem {
  /** @param {object} frame  the approval_request
   *  @param {function} answer  (toolCallId, decision, reason) => true when the frame went out
   *  @param {function} connection  () => the socket's state: "open" (an answer can go out),
   *                               "connecting", "waiting" or "closed" */
  constructor(frame, answer, connection = () => "open") {
    this.kind = "approval";
    this.toolCallId = frame.toolCallId;
    this.name = frame.toolName || "tool";
    this.arguments = frame.arguments ?? "";
    this.answer = answer;
    this.connection = connection;
    this.state = "pending"; // pending | approved | denied | expired | closed (run ended unanswered)
    this.reason = "";
    this.settledAt = null; // the approval_result's `ts`
    this.serverStopped = false; // expired because the server stopped while it waited
    this.sending = false;
    this.el = null;
  }
  get pending() {
    return this.state === "pending";
  }
  settle(frame) {
    this.state = ["approved", "denied", "expired"].includes(frame.decision) ? frame.decision : "denied";
    this.reason = String(frame.reason ?? "");
    this.settledAt = frame.ts ?? null;
    if (this.el) this.update();
  }
  /** It expired because the server running the run stopped (the turn reads that from the log):
   * nobody failed to answer. */
  stoppedByServer() {
    this.serverStopped = true;
    if (this.el) this.update();
  }
  /** The run ended without a result for it (a log cut short): nothing can answer it any more. */
  close() {
    if (!this.pending) return;
    this.state = "closed";
    if (this.el) this.update();
  }
  /** The connection came or went: the buttons follow it. */
  refresh() {
    if (this.el && this.pending) this.update();
  }
  outcomeText() {
    const why = this.reason ? `: ${this.reason}` : "";
    if (this.state === "approved") return t("Approved") + why;
    if (this.state === "denied") return t("Denied") + why;
    if (this.state === "expired" && this.serverStopped) {
      return t("Not run: the server restarted while the request waited for your decision");
    }
    if (this.state === "expired") return t("Expired: nobody answered in time") + (this.reason && !this.reason.startsWith("no answer") ? ` (${this.reason})` : "");
    return t("Not answered");
  }
  send(decision) {
    if (!this.pending || this.sending || this.connection() !== "open") return;
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
    this.offline = h("div", { className: "approval-offline", role: "status" });
    this.outcome = h("div", { className: "approval-outcome", role: "status" });
    this.title = h("div", { className: "tl-title" });
    this.el = h("li", { className: "tl-item tl-approval", dataset: { toolCallId: this.toolCallId || "" } }, this.icon,
      h("div", { className: "tl-body" }, this.title,
        foldedPre(prettyJson(this.arguments || "{}"), "tool-pre approval-args"), this.form, this.offline, this.outcome));
    this.update();
    return this.el;
  }
  update() {
    const connection = this.connection();
    const offline = this.pending && connection !== "open";
    this.offline.textContent = !offline ? ""
      : connection === "connecting" ? t("Connecting… You can approve or deny once connected.")
        : t("Not connected: you can approve or deny once the connection is back.");
    this.el.dataset.state = this.state;
    this.el.dataset.offline = String(offline);
    this.icon.className = `status-icon ${{ pending: "approval", approved: "done" }[this.state] || "stopped"}`;
    this.title.replaceChildren(
      h("span", { text: this.pending ? t("Approval needed to run") : t("Approval for") }), " ",
      h("span", { className: "tool-name", text: this.name }));
    this.form.hidden = !this.pending;
    for (const control of [this.approveButton, this.denyButton]) {
      control.disabled = this.sending || offline;
      control.title = offline ? this.offline.textContent : "";
    }
    this.reasonInput.disabled = this.sending; // a reason may be typed while offline, and sent later
    this.offline.hidden = !offline;
    this.outcome.hidden = this.pending;
    this.outcome.textContent = this.pending ? "" : this.outcomeText();
  }
}

/** A message the user sent the running agent (docs/protocol.md, "Steering"): a chip, with a
 * button to withdraw it, until the agent reads it before its next step; then the note it read.
 * Not read before the run ended, it became the next waiting message (the composer shows it). */
export class SteerItem {
  /** @param {object} frame  the steer event
   *  @param {function|null} withdraw  (queueId) => true when the unqueue frame went out; null where
   *                                   nothing may be withdrawn (a shared snapshot) */
  constructor(frame, withdraw) {
    this.kind = "steer";
    this.queueId = String(frame.queueId ?? "");
    this.content = String(frame.content ?? "");
    this.withdraw = withdraw;
    this.state = "pending"; // pending | applied | waiting | withdrawn | cleared
    this.el = null;
  }
  get pending() {
    return this.state === "pending";
  }
  /** Read by the agent, withdrawn, or left for after the run. */
  settle(state) {
    if (!this.pending) return;
    this.state = state;
    if (this.el) this.el.replaceWith(this.mount());
  }
  mount() {
    const titles = {
      pending: t("Your note, read at the agent's next step"),
      applied: t("Your note, read by the agent"),
      waiting: t("Your note came too late for this answer: it is sent next"),
      withdrawn: t("Your note, withdrawn"),
      cleared: t("Your note, withdrawn"),
    };
    const body = h("div", { className: "tl-body" }, h("div", { className: "tl-title", text: titles[this.state] || titles.withdrawn }));
    if (this.pending) {
      const chip = h("div", { className: "chip steer-chip" }, h("span", { className: "chip-name", text: this.content, title: this.content }));
      if (this.withdraw) {
        const remove = h("button", { type: "button", className: "chip-remove", "aria-label": tf("Withdraw: %s", [this.content]), title: t("Withdraw") },
          icon("close"));
        remove.addEventListener("click", () => this.withdraw(this.queueId));
        chip.append(remove);
      }
      body.append(chip);
    } else {
      body.append(h("div", { className: "steer-text", text: this.content }));
    }
    const mark = this.state === "applied" ? "done" : this.pending ? "running" : "stopped";
    this.el = h("li", { className: `tl-item tl-steer is-${this.state}`, dataset: { queueId: this.queueId } }, statusIcon(mark), body);
    return this.el;
  }
}
