// One assistant turn = one run: the user's message, a timeline of what the agent did
// (thinking, tool calls, errors, sources) and the Markdown answer under it. This module owns
// the Turn (applying events, drawing the turn) and the per-frame answer re-rendering; the
// steps are in timeline-items.js, the summary and status words in turn-labels.js.
//
// A Turn keeps its state apart from its DOM: events can be applied before the turn is
// mounted (a long history is applied first and drawn in batches), and once mounted each
// event updates only the element it concerns. The answer's Markdown is re-rendered at
// most once per animation frame, however many text deltas arrive.
import { h } from "./dom.js";
import { FeedbackBar } from "./feedback.js";
import { renderMarkdown } from "./markdown.js";
import { ErrorItem, ReferenceItem, ThinkingItem, ToolItem } from "./timeline-items.js";
import { statusMessage, turnSummary } from "./turn-labels.js";
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
  requestAnimationFrame(() => {
    frameRequested = false;
    const turns = [...dirtyTurns];
    dirtyTurns.clear();
    for (const each of turns) each.renderAnswer();
    if (afterRenderHook) afterRenderHook();
  });
}

// --- the turn ------------------------------------------------------------------------------
export class Turn {
  constructor(runId) {
    this.runId = runId;
    this.userText = null;
    this.items = [];
    this.tools = new Map();
    this.text = "";
    this.parts = []; // the answer's text events: {seq, content}
    this.status = null; // null while running, else the complete event's status
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
        if (this.el) this.userBubble.textContent = this.userText;
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
        if (!item) {
          item = new ToolItem(frame);
          this.tools.set(item.toolCallId, item);
          this.pushItem(item);
        }
        item.end(frame);
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
      case "complete":
        this.status = frame.status || "succeeded";
        if (this.status === "failed" || this.status === "interrupted") this.hasError = true;
        for (const tool of this.tools.values()) tool.interrupt();
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
    this.el = h("article", { className: "turn", dataset: { runId: this.runId } },
      h("div", { className: "msg msg-user" }, h("div", { className: "visually-hidden", text: t("You said:") }), this.userBubble),
      h("div", { className: "msg msg-assistant" }, this.timeline, this.answer, this.statusLine, this.feedback.mount()));
    this.updateSummary();
    this.updateStatus();
    this.updateFeedback();
    this.renderAnswer();
    return this.el;
  }

  updateSummary() {
    const summary = turnSummary(this);
    this.el.classList.toggle("is-running", this.running);
    this.timeline.dataset.state = summary.state;
    // Steps to show: the cancel note alone is said by the status line under the answer.
    const steps = this.items.filter((i) => !(i.kind === "error" && i.isCancel)).length;
    this.timeline.hidden = !this.running && steps === 0;
    this.timeline.classList.toggle("is-empty", this.items.length === 0); // nothing to unfold
    this.summaryIcon.className = `status-icon ${summary.icon}`;
    this.summaryLabel.textContent = summary.label;
    this.summaryCounts.textContent = summary.counts;
  }

  updateStatus() {
    const message = statusMessage(this.status);
    this.statusLine.textContent = message;
    this.statusLine.hidden = !message;
    this.statusLine.dataset.status = this.status || "running";
  }

  /** The thumbs are offered once the run has ended. */
  updateFeedback() {
    this.feedback.el.hidden = this.running;
  }

  renderAnswer() {
    if (!this.el) return;
    this.answer.classList.toggle("streaming", this.running && this.text.length > 0);
    if (this.renderedText === this.text) return;
    this.renderedText = this.text;
    this.answer.replaceChildren(renderMarkdown(this.text));
    this.answer.hidden = this.text.length === 0;
  }

  /** The answer's Markdown source (for the copy-answer button). */
  get answerText() {
    return this.text;
  }
}
