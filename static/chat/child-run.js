// A sub-agent's run (docs/protocol.md, "Sub-agents"): a child run started by a delegate tool
// call (`agent__<slug>`) of its parent, stored in the same log with `parentRunId` and
// `parentToolCallId`. It is drawn inside that call's card as a nested timeline: the task, the
// child's own steps (its delegate calls nest the same way) and its answer; open while it works,
// folded once done, left open when it failed. The chat page and the shared view route events
// through ChildRuns, so both draw the same tree from the same events.
import { h } from "./dom.js";
import { renderMarkdown } from "./markdown.js";
import { ApprovalItem, ErrorItem, ThinkingItem, ToolItem } from "./timeline-items.js";
import { agentName, statusMessage, turnFooter, turnSummary } from "./turn-labels.js";
import { t } from "./i18n.js";

export class ChildRun {
  /** @param actions  the page's turn actions: approve(...) and readOnly, as a Turn's */
  constructor(runId, actions) {
    this.runId = runId;
    this.actions = actions;
    this.task = "";
    this.agentLabel = "";
    this.items = [];
    this.tools = new Map();
    this.approvals = new Map();
    this.text = "";
    this.status = null;
    this.stats = null;
    this.hasError = false;
    this.retries = 0;
    this.el = null;
    this.renderPending = false;
  }

  get running() {
    return this.status === null;
  }

  apply(frame, live) {
    switch (frame.type) {
      case "user_message":
        this.task = String(frame.content ?? "");
        this.agentLabel = [agentName(frame.agent, frame.agentName), frame.model].filter((part) => typeof part === "string" && part).join(" · ");
        if (this.el) {
          this.taskEl.textContent = this.task;
          this.agentEl.textContent = this.agentLabel;
        }
        break;
      case "thinking": {
        let last = this.items[this.items.length - 1];
        if (!last || last.kind !== "thinking") last = this.pushItem(new ThinkingItem());
        last.append(String(frame.content ?? ""));
        break;
      }
      case "text":
        this.text += String(frame.content ?? "");
        this.scheduleAnswer();
        break;
      case "tool_start": {
        const item = new ToolItem(frame);
        this.tools.set(item.toolCallId, item);
        this.pushItem(item);
        break;
      }
      case "tool_end": {
        let item = this.tools.get(frame.toolCallId);
        let notRun = false;
        if (!item) {
          // A call denied at approval ends without a start: its arguments are the request's.
          const asked = this.approvals.get(frame.toolCallId);
          notRun = Boolean(asked);
          item = this.pushItem(new ToolItem(asked ? { ...frame, arguments: asked.arguments } : frame));
          this.tools.set(item.toolCallId, item);
        }
        item.end(frame, { notRun });
        break;
      }
      case "error": {
        const item = new ErrorItem(frame);
        if (item.isWarning) this.retries += 1;
        else if (!item.isCancel) this.hasError = true;
        this.pushItem(item);
        break;
      }
      case "approval_request": {
        const answer = (id, decision, reason) => Boolean(this.actions?.approve(id, decision, reason));
        const item = new ApprovalItem(frame, answer, () => this.actions?.connection?.() ?? "open");
        this.approvals.set(item.toolCallId, item);
        this.pushItem(item);
        if (this.el) this.el.open = true; // the question must be seen
        break;
      }
      case "approval_result":
        this.approvals.get(frame.toolCallId)?.settle(frame);
        break;
      case "complete":
        this.status = frame.status || "succeeded";
        this.stats = { durationMs: frame.durationMs, usage: frame.usage };
        if (this.status === "failed" || this.status === "interrupted") this.hasError = true;
        for (const tool of this.tools.values()) tool.interrupt();
        for (const approval of this.approvals.values()) approval.close();
        if (this.el && live) this.el.open = this.hasError;
        this.onEnd?.(live);
        break;
      default:
        return;
    }
    if (this.el) this.update();
  }

  /** A question of this run, or of a run it started, waits for the user. */
  get awaitingApproval() {
    if (!this.running) return false;
    return [...this.approvals.values()].some((approval) => approval.pending) || this.children().some((child) => child.awaitingApproval);
  }

  connectionChanged() {
    for (const approval of this.approvals.values()) approval.refresh();
    for (const child of this.children()) child.connectionChanged();
  }

  children() {
    return [...this.tools.values()].map((tool) => tool.child).filter(Boolean);
  }

  pushItem(item) {
    this.items.push(item);
    if (this.el) this.list.append(item.mount());
    return item;
  }

  scheduleAnswer() {
    if (!this.el || this.renderPending) return;
    this.renderPending = true;
    requestAnimationFrame(() => {
      this.renderPending = false;
      this.renderAnswer();
    });
  }

  renderAnswer() {
    this.answer.replaceChildren(renderMarkdown(this.text));
    this.answer.hidden = !this.text;
  }

  mount() {
    this.icon = h("span", { className: "status-icon", "aria-hidden": "true" });
    this.agentEl = h("span", { className: "child-agent", text: this.agentLabel });
    this.stateEl = h("span", { className: "tl-counts" });
    this.taskEl = h("div", { className: "child-task", text: this.task });
    this.list = h("ol", { className: "timeline-items" });
    for (const item of this.items) this.list.append(item.mount());
    this.answer = h("div", { className: "markdown child-answer" });
    this.statusLine = h("div", { className: "turn-status" });
    this.footer = h("div", { className: "turn-footer" });
    this.el = h("details", { className: "child-run", dataset: { runId: this.runId } },
      h("summary", { className: "child-summary" }, this.icon, this.agentEl, this.stateEl),
      h("div", { className: "detail-label", text: t("Task") }), this.taskEl,
      this.list, this.answer, this.statusLine, this.footer);
    this.el.open = this.running || this.hasError;
    this.renderAnswer();
    this.update();
    return this.el;
  }

  update() {
    const summary = turnSummary(this);
    this.el.dataset.state = summary.state;
    this.icon.className = `status-icon ${summary.icon}`;
    this.stateEl.textContent = ` · ${summary.label}${summary.counts}`;
    const message = statusMessage(this.status);
    this.statusLine.textContent = message;
    this.statusLine.hidden = !message;
    this.statusLine.dataset.status = this.status || "running";
    this.footer.textContent = turnFooter(this);
    this.footer.hidden = !this.footer.textContent;
  }
}

/** The child runs of one conversation (or shared snapshot), found by their runId. */
export class ChildRuns {
  /** @param turns  runId -> Turn: the top-level runs a child may hang from */
  constructor(turns, actions) {
    this.turns = turns;
    this.actions = actions;
    this.children = new Map();
  }

  /** Applies an event of a child run and answers true; false for any other event. */
  apply(frame, live) {
    if (!frame.parentRunId || !frame.runId) return false;
    let child = this.children.get(frame.runId);
    if (!child) {
      child = new ChildRun(frame.runId, this.actions);
      this.children.set(frame.runId, child);
      // The call's card exists: its tool_start is stored before the child's first event.
      const parent = this.turns.get(frame.parentRunId) ?? this.children.get(frame.parentRunId);
      parent?.tools.get(frame.parentToolCallId)?.attachChild(child);
    }
    child.apply(frame, live);
    return true;
  }
}
