// One assistant turn = one run: the user's message, a timeline of what the agent did
// (thinking, tool calls, errors, sources) and the Markdown answer under it. This module owns
// the Turn: applying events and drawing the turn. The user's message's buttons (edit, the
// question's versions ‹ n / m ›) and files are in user-message.js, the answer's per-frame
// re-rendering and its buttons (the answer's versions, copy answer, regenerate) in answer.js,
// the steps in timeline-items.js, the summary and status words in turn-labels.js. Which
// version is shown is decided by the conversation (conversation.js); a Turn only draws what it
// is told.
//
// A Turn keeps its state apart from its DOM: events can be applied before the turn is
// mounted (a long history is applied first and drawn in batches), and once mounted each
// event updates only the element it concerns.
import { mountAnswerActions, mountCutNote, renderAnswer, scheduleAnswer, updateAnswerVersions, updateCutNote } from "./answer.js";
import { h } from "./dom.js";
import { FeedbackBar } from "./feedback.js";
import { Pace } from "./pacing.js";
import { ApprovalItem, ErrorItem, ReferenceItem, SteerItem, ThinkingItem, ToolItem } from "./timeline-items.js";
import { agentName, statusMessage, turnFooter, turnSummary } from "./turn-labels.js";
import { mountUserActions, updateAttachments, updateVersions } from "./user-message.js";
import { t } from "./i18n.js";

export class Turn {
  /**
   * @param {string} runId
   * @param {object} actions  edit(turn, content) and regenerate(turn): true when sent;
   *                          showVersion(turn, step, kind): step -1 / +1 among the versions of
   *                          the turn's question (kind "question") or answer ("answer");
   *                          approve(toolCallId, decision, reason): true when sent;
   *                          connection(): the socket's state ("open": an answer can go out);
   *                          unqueue(queueId): withdraws a steer not read yet, true when sent
   */
  constructor(runId, actions = null) {
    this.runId = runId;
    this.actions = actions;
    // Its place among the versions (set by the conversation from the user_message).
    this.seq = null;
    this.parentSeq = null;
    this.shown = true;
    this.version = 1; // of its question (edits)
    this.versions = 1;
    this.answerVersion = 1; // of its answer (regenerates)
    this.answerVersions = 1;
    this.userText = null;
    this.agentLabel = "";
    this.attachments = []; // the user_message's files: [{path, size}]
    this.items = [];
    this.tools = new Map();
    this.approvals = new Map(); // toolCallId -> ApprovalItem (a later round may reuse an id)
    this.steers = new Map(); // queueId -> SteerItem
    this.expiredJustNow = []; // see apply()
    this.text = "";
    this.parts = []; // the answer's text events: {seq, content}
    this.pace = new Pace();
    this.status = null; // null while running, else the complete event's status
    this.stats = null; // complete's durationMs and usage
    this.completeSeq = null; // the seq of its complete: a compaction names it (throughSeq)
    this.context = null; // complete's context: {tokens, limit} (the composer's gauge)
    this.compactions = []; // summaries of the turns up to this one (compaction-row.js)
    this.finishReason = ""; // complete's finishReason: "length" for an answer cut off at the token limit
    this.hasError = false; // something went wrong for good (red); a retry is only a warning
    this.retries = 0;
    this.el = null;
    this.renderedText = null;
    this.feedback = new FeedbackBar(runId);
  }

  get running() {
    return this.status === null;
  }

  /** Applies one persisted event; `live` marks one that happened just now (folds on complete). */
  apply(frame, live) {
    // Requests that expired with nothing after them but the ends of calls: a server that takes an
    // interrupted run over writes these, then INTERRUPTED, in one round (one `ts`).
    if (!["approval_result", "tool_end", "error"].includes(frame.type)) this.expiredJustNow = [];
    switch (frame.type) {
      case "user_message":
        this.userText = String(frame.content ?? "");
        // The agent and model that answer (logs stored before profiles existed name none).
        this.agentLabel = [agentName(frame.agent, frame.agentName), frame.model].filter((part) => typeof part === "string" && part).join(" · ");
        this.attachments = Array.isArray(frame.attachments) ? frame.attachments.filter((a) => a && typeof a.path === "string") : [];
        if (this.el) {
          this.userBubble.textContent = this.userText;
          this.updateAgent();
          updateAttachments(this);
        }
        break;
      case "thinking": {
        let last = this.items[this.items.length - 1];
        if (!last || last.kind !== "thinking") last = this.pushItem(new ThinkingItem());
        last.append(String(frame.content ?? ""));
        break;
      }
      case "text": {
        const content = String(frame.content ?? "");
        this.parts.push({ seq: frame.seq, content });
        if (live && this.running) this.pace.arrived(this.text.length, this.text.length + content.length, performance.now());
        this.text += content;
        if (this.el) scheduleAnswer(this);
        break;
      }
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
          item = new ToolItem(asked ? { ...frame, arguments: asked.arguments } : frame);
          this.tools.set(item.toolCallId, item);
          this.pushItem(item);
        }
        item.end(frame, { notRun });
        break;
      }
      case "error": {
        if (frame.code === "INTERRUPTED") {
          for (const approval of this.expiredJustNow) {
            if (approval.settledAt === (frame.ts ?? null)) approval.stoppedByServer();
          }
        }
        this.expiredJustNow = [];
        const item = new ErrorItem(frame);
        if (item.isWarning) this.retries += 1;
        else if (!item.isCancel) this.hasError = true;
        this.discard(frame, item);
        this.pushItem(item);
        break;
      }
      case "reference":
        this.pushItem(new ReferenceItem(frame));
        break;
      case "approval_request": {
        const answer = (id, decision, reason) => Boolean(this.actions?.approve(id, decision, reason));
        const item = new ApprovalItem(frame, answer, () => this.actions?.connection() ?? "open");
        this.approvals.set(item.toolCallId, item);
        this.pushItem(item);
        if (this.el) this.timeline.open = true; // the question must be seen
        break;
      }
      case "approval_result": {
        const item = this.approvals.get(frame.toolCallId);
        if (item) item.settle(frame);
        if (item && item.state === "expired") this.expiredJustNow.push(item);
        break;
      }
      case "steer": {
        const withdraw = this.actions && !this.actions.readOnly ? (queueId) => this.actions.unqueue(queueId) : null;
        const item = new SteerItem(frame, withdraw);
        this.steers.set(item.queueId, item);
        this.pushItem(item);
        break;
      }
      case "steer_applied":
        this.steers.get(frame.queueId)?.settle("applied");
        break;
      case "complete":
        this.status = frame.status || "succeeded";
        this.stats = { durationMs: frame.durationMs, usage: frame.usage };
        this.completeSeq = frame.seq ?? null;
        this.context = frame.context && Number(frame.context.limit) > 0 ? frame.context : null;
        this.finishReason = typeof frame.finishReason === "string" ? frame.finishReason : "";
        this.pace.reset(); // the whole answer with the run's end, as its status line says
        if (this.status === "failed" || this.status === "interrupted") this.hasError = true;
        for (const tool of this.tools.values()) tool.interrupt();
        for (const approval of this.approvals.values()) approval.close();
        if (this.el) {
          this.updateStatus();
          this.updateFeedback();
          updateCutNote(this);
          scheduleAnswer(this);
          if (live) this.timeline.open = this.hasError || this.retries > 0;
        }
        break;
      default:
        return; // an event type this page does not know yet: ignored, as the protocol allows
    }
    if (this.el) this.updateSummary();
  }

  /** A steer of this turn left without being read: withdrawn, cleared, or waiting for after the run. */
  steerLeft(queueId, reason) {
    this.steers.get(queueId)?.settle(reason === "waiting" ? "waiting" : reason === "cleared" ? "cleared" : "withdrawn");
  }

  /** The server names the text a failed attempt takes out of the answer (`discards`: the seq of
   * its first text event, docs/protocol.md, "Events"); the page follows that and derives nothing.
   * Logs stored before the field existed keep such text in the answer. */
  discard(frame, item) {
    if (!Number.isInteger(frame.discards)) return;
    const discarded = (part) => part.seq >= frame.discards && part.seq < frame.seq;
    const kept = this.parts.filter((part) => !discarded(part));
    if (kept.length === this.parts.length) return;
    item.discarded = this.parts.filter(discarded).map((part) => part.content).join("");
    this.parts = kept;
    this.text = kept.map((part) => part.content).join("");
    this.pace.reset();
    if (this.el) scheduleAnswer(this);
  }

  /** A compaction that summarized the turns up to this one: a row after it. */
  addCompaction(row) {
    this.compactions.push(row);
    if (this.el) this.el.append(row.mount());
  }

  pushItem(item) {
    this.items.push(item);
    if (this.el) this.list.append(item.mount());
    return item;
  }

  // -- DOM --
  mount() {
    this.userBubble = h("div", { className: "bubble", text: this.userText ?? "" });
    this.summaryIcon = h("span", { className: "status-icon", "aria-hidden": "true" });
    this.summaryLabel = h("span", { className: "tl-label" });
    this.summaryCounts = h("span", { className: "tl-counts" });
    this.list = h("ol", { className: "timeline-items" });
    for (const item of this.items) this.list.append(item.mount());
    this.timeline = h("details", { className: "timeline" },
      h("summary", { className: "timeline-summary" }, this.summaryIcon, this.summaryLabel, this.summaryCounts),
      this.list);
    // Open while running, and after the end only when something went wrong.
    this.timeline.open = this.running || this.hasError || this.retries > 0;
    this.answer = h("div", { className: "answer markdown" });
    this.statusLine = h("div", { className: "turn-status", role: "status" });
    this.footer = h("div", { className: "turn-footer" });
    this.agentTag = h("div", { className: "turn-agent" });
    this.attachmentList = h("div", { className: "msg-attachments", "aria-label": t("Attached files") });
    this.userMsg = h("div", { className: "msg msg-user" },
      h("div", { className: "visually-hidden", text: t("You said:") }), this.userBubble, this.attachmentList, mountUserActions(this));
    this.el = h("article", { className: "turn", dataset: { runId: this.runId } },
      this.userMsg,
      h("div", { className: "msg msg-assistant" }, this.agentTag, this.timeline, this.answer, mountCutNote(this), this.statusLine, this.footer,
        h("div", { className: "answer-bar" }, mountAnswerActions(this), this.feedback.mount())));
    for (const row of this.compactions) this.el.append(row.mount());
    this.el.hidden = !this.shown;
    updateAttachments(this);
    updateVersions(this);
    updateAnswerVersions(this);
    this.updateAgent();
    this.updateSummary();
    this.updateStatus();
    this.updateFeedback();
    renderAnswer(this);
    return this.el;
  }

  /** Shown or hidden (a version on another branch), and which version of its question and of
   * its answer it is. */
  place({ shown, version, versions, answerVersion, answerVersions }) {
    this.shown = shown;
    this.version = version;
    this.versions = versions;
    this.answerVersion = answerVersion;
    this.answerVersions = answerVersions;
    if (!this.el) return;
    this.el.hidden = !shown;
    updateVersions(this);
    updateAnswerVersions(this);
  }

  updateSummary() {
    const summary = turnSummary(this);
    this.el.classList.toggle("is-running", this.running);
    this.answerActions.hidden = this.running || this.seq === null;
    this.timeline.dataset.state = summary.state;
    // Steps to show: the cancel note alone is said by the status line under the answer.
    const steps = this.items.filter((i) => !(i.kind === "error" && i.isCancel)).length;
    this.timeline.hidden = !this.running && steps === 0;
    this.timeline.classList.toggle("is-empty", this.items.length === 0); // nothing to unfold
    this.summaryIcon.className = `status-icon ${summary.icon}`;
    this.summaryLabel.textContent = summary.label;
    this.summaryCounts.textContent = summary.counts;
  }

  updateAgent() {
    this.agentTag.textContent = this.agentLabel;
    this.agentTag.hidden = !this.agentLabel;
  }

  updateStatus() {
    const message = statusMessage(this.status);
    this.statusLine.textContent = message;
    this.statusLine.hidden = !message;
    this.statusLine.dataset.status = this.status || "running";
    this.footer.textContent = turnFooter(this);
    this.footer.hidden = !this.footer.textContent;
  }

  /** Waiting for the user's decision on a tool call. */
  get awaitingApproval() {
    if (!this.running) return false;
    return [...this.approvals.values()].some((approval) => approval.pending) || this.children().some((child) => child.awaitingApproval);
  }

  /** The socket opened or closed: the approval cards' buttons follow it, its sub-agents' too. */
  connectionChanged() {
    for (const approval of this.approvals.values()) approval.refresh();
    for (const child of this.children()) child.connectionChanged();
  }

  /** The child runs its delegate calls started (child-run.js). */
  children() {
    return [...this.tools.values()].map((tool) => tool.child).filter(Boolean);
  }

  /** The thumbs are offered once the run has ended, to the owner (not on a shared snapshot). */
  updateFeedback() {
    this.feedback.el.hidden = this.running || Boolean(this.actions?.readOnly);
  }

  /** The answer's Markdown source (for the copy-answer button). */
  get answerText() {
    return this.text;
  }
}
