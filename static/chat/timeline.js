// One assistant turn = one run: the user's message, a timeline of what the agent did
// (thinking, tool calls, errors, sources) and the Markdown answer under it. This module owns
// the Turn (applying events, drawing the turn, its buttons: edit, versions ‹ n / m ›, copy
// answer, regenerate) and the per-frame answer re-rendering; the steps are in
// timeline-items.js, the summary and status words in turn-labels.js. Which version is shown
// is decided by the conversation (conversation.js); a Turn only draws what it is told.
//
// A Turn keeps its state apart from its DOM: events can be applied before the turn is
// mounted (a long history is applied first and drawn in batches), and once mounted each
// event updates only the element it concerns. The answer's Markdown is re-rendered at
// most once per animation frame, however many text deltas arrive; a live answer is drawn at an
// even pace across each frame's window (pacing.js).
import { fileChip, humanSize } from "./attachments.js";
import { h } from "./dom.js";
import { FeedbackBar } from "./feedback.js";
import { copyText, renderMarkdown } from "./markdown.js";
import { Pace } from "./pacing.js";
import { ApprovalItem, ErrorItem, ReferenceItem, ThinkingItem, ToolItem } from "./timeline-items.js";
import { statusMessage, turnFooter, turnSummary } from "./turn-labels.js";
import { t } from "./i18n.js";

// --- markdown re-rendering, batched per animation frame ---------------------------------
const dirtyTurns = new Set();
let frameRequested = false;
let afterRenderHook = null;

export function onAfterRender(hook) {
  afterRenderHook = hook;
}

function scheduleAnswer(turn) {
  dirtyTurns.add(turn);
  if (frameRequested) return;
  frameRequested = true;
  requestAnimationFrame((now) => {
    frameRequested = false;
    const turns = [...dirtyTurns];
    dirtyTurns.clear();
    for (const each of turns) {
      each.renderAnswer(now);
      if (each.pace.active) scheduleAnswer(each); // more to reveal at the next frame
    }
    if (afterRenderHook) afterRenderHook();
  });
}

// --- the turn ------------------------------------------------------------------------------
export class Turn {
  /**
   * @param {string} runId
   * @param {object} actions  edit(turn, content) and regenerate(turn): true when sent;
   *                          showVersion(turn, step): step -1 / +1 among the turn's versions;
   *                          approve(toolCallId, decision, reason): true when sent
   */
  constructor(runId, actions = null) {
    this.runId = runId;
    this.actions = actions;
    // Its place among the versions (set by the conversation from the user_message).
    this.seq = null;
    this.parentSeq = null;
    this.shown = true;
    this.version = 1;
    this.versions = 1;
    this.userText = null;
    this.agentLabel = "";
    this.attachments = []; // the user_message's files: [{path, size}]
    this.items = [];
    this.tools = new Map();
    this.approvals = new Map(); // toolCallId -> ApprovalItem (a later round may reuse an id)
    this.text = "";
    this.parts = []; // the answer's text events: {seq, content}
    this.pace = new Pace();
    this.status = null; // null while running, else the complete event's status
    this.stats = null; // complete's durationMs and usage
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
    switch (frame.type) {
      case "user_message":
        this.userText = String(frame.content ?? "");
        // The agent and model that answer (logs stored before profiles existed name none).
        this.agentLabel = [frame.agentName, frame.model].filter((part) => typeof part === "string" && part).join(" · ");
        this.attachments = Array.isArray(frame.attachments) ? frame.attachments.filter((a) => a && typeof a.path === "string") : [];
        if (this.el) {
          this.userBubble.textContent = this.userText;
          this.updateAgent();
          this.updateAttachments();
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
        const item = new ApprovalItem(frame, answer);
        this.approvals.set(item.toolCallId, item);
        this.pushItem(item);
        if (this.el) this.timeline.open = true; // the question must be seen
        break;
      }
      case "approval_result": {
        const item = this.approvals.get(frame.toolCallId);
        if (item) item.settle(frame);
        break;
      }
      case "complete":
        this.status = frame.status || "succeeded";
        this.stats = { durationMs: frame.durationMs, usage: frame.usage };
        this.pace.reset(); // the whole answer with the run's end, as its status line says
        if (this.status === "failed" || this.status === "interrupted") this.hasError = true;
        for (const tool of this.tools.values()) tool.interrupt();
        for (const approval of this.approvals.values()) approval.close();
        if (this.el) {
          this.updateStatus();
          this.updateFeedback();
          scheduleAnswer(this);
          if (live) this.timeline.open = this.hasError || this.retries > 0;
        }
        break;
      default:
        return; // an event type this page does not know yet: ignored, as the protocol allows
    }
    if (this.el) this.updateSummary();
  }

  /** The server names the text a failed attempt takes out of the answer (`discards`: the seq of
   * its first text event, PROTOCOL section 4); the page follows that and derives nothing.
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
      h("div", { className: "visually-hidden", text: t("You said:") }), this.userBubble, this.attachmentList, this.mountUserActions());
    this.el = h("article", { className: "turn", dataset: { runId: this.runId } },
      this.userMsg,
      h("div", { className: "msg msg-assistant" }, this.agentTag, this.timeline, this.answer, this.statusLine, this.footer,
        this.mountAnswerActions(), this.feedback.mount()));
    this.el.hidden = !this.shown;
    this.updateAttachments();
    this.updateVersions();
    this.updateAgent();
    this.updateSummary();
    this.updateStatus();
    this.updateFeedback();
    this.renderAnswer();
    return this.el;
  }

  mountUserActions() {
    const button = (action, label, text, onClick) => {
      const el = h("button", { type: "button", className: "turn-action", dataset: { action }, "aria-label": label, title: label, text });
      el.addEventListener("click", onClick);
      return el;
    };
    this.prevVersion = button("previous-version", t("Previous version"), "‹", () => this.actions?.showVersion(this, -1));
    this.nextVersion = button("next-version", t("Next version"), "›", () => this.actions?.showVersion(this, 1));
    this.versionLabel = h("span", { className: "version-label" });
    this.versionNav = h("div", { className: "versions", role: "group", "aria-label": t("Versions of this message") },
      this.prevVersion, this.versionLabel, this.nextVersion);
    this.editButton = button("edit", t("Edit this message"), t("Edit"), () => this.startEdit());
    return h("div", { className: "msg-actions" }, this.versionNav, this.editButton);
  }

  mountAnswerActions() {
    const copy = h("button", { type: "button", className: "turn-action", dataset: { action: "copy-answer" }, title: t("Copy the answer as Markdown"), text: t("Copy") });
    copy.addEventListener("click", async () => {
      const ok = await copyText(this.answerText);
      copy.textContent = ok ? t("Copied") : t("Copy failed");
      setTimeout(() => {
        if (copy.isConnected) copy.textContent = t("Copy");
      }, 1500);
    });
    const regenerate = h("button", { type: "button", className: "turn-action", dataset: { action: "regenerate" }, title: t("Answer this message again"), text: t("Regenerate") });
    regenerate.addEventListener("click", () => this.actions?.regenerate(this));
    this.answerActions = h("div", { className: "answer-actions" }, copy, regenerate);
    return this.answerActions;
  }

  /** The user's message becomes a text box; saving sends an edit (a new version of this turn). */
  startEdit() {
    if (this.editor || !this.el) return;
    const input = h("textarea", { className: "edit-input", rows: "3", "aria-label": t("Edit your message") });
    input.value = this.userText ?? "";
    const save = h("button", { type: "submit", className: "btn btn-primary", text: t("Send") });
    const cancel = h("button", { type: "button", className: "btn", text: t("Cancel") });
    this.editor = h("form", { className: "edit-form" }, input, h("div", { className: "edit-buttons" }, cancel, save));
    this.editor.addEventListener("submit", (event) => {
      event.preventDefault();
      const content = input.value.trim();
      if (content && this.actions?.edit(this, content)) this.stopEdit();
    });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Escape") this.stopEdit();
    });
    cancel.addEventListener("click", () => this.stopEdit());
    this.userMsg.classList.add("is-editing");
    this.userBubble.after(this.editor);
    input.focus();
  }

  stopEdit() {
    if (!this.editor) return;
    this.editor.remove();
    this.editor = null;
    this.userMsg.classList.remove("is-editing");
  }

  /** The message's files as chips that download them (names as text only). */
  updateAttachments() {
    this.attachmentList.replaceChildren(...this.attachments.map((file) => fileChip(
      String(file.path),
      h("span", { className: "chip-meta", text: Number.isInteger(file.size) ? humanSize(file.size) : "" }),
      { href: this.actions ? this.actions.fileUrl(String(file.path)) : null },
    )));
    this.attachmentList.hidden = this.attachments.length === 0;
  }

  /** Shown or hidden (a version on another branch), and which version of its turn it is. */
  place({ shown, version, versions }) {
    this.shown = shown;
    this.version = version;
    this.versions = versions;
    if (!this.el) return;
    this.el.hidden = !shown;
    this.updateVersions();
  }

  updateVersions() {
    this.versionNav.hidden = this.versions < 2;
    this.versionLabel.textContent = `${this.version} / ${this.versions}`;
    this.prevVersion.disabled = this.version <= 1;
    this.nextVersion.disabled = this.version >= this.versions;
    // Without a stored user_message (cannot happen) there is nothing to edit or answer again.
    this.editButton.hidden = this.seq === null;
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

  /** The thumbs are offered once the run has ended. */
  updateFeedback() {
    this.feedback.el.hidden = this.running;
  }

  renderAnswer(now = performance.now()) {
    if (!this.el) return;
    this.answer.classList.toggle("streaming", this.running && this.text.length > 0);
    const text = this.pace.visible(this.text, now);
    if (this.renderedText === text) return;
    this.renderedText = text;
    this.answer.replaceChildren(renderMarkdown(text));
    this.answer.hidden = text.length === 0;
  }

  /** The answer's Markdown source (for the copy-answer button). */
  get answerText() {
    return this.text;
  }
}
