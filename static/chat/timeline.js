// One assistant turn = one run: the user's message, a timeline of what the agent did
// (thinking, tool calls, errors, sources) and the Markdown answer under it.
//
// A Turn keeps its state apart from its DOM: events can be applied before the turn is
// mounted (a long history is applied first and drawn in batches), and once mounted each
// event updates only the element it concerns. The answer's Markdown is re-rendered at
// most once per animation frame, however many text deltas arrive.
import { renderMarkdown } from "./markdown.js";
import { t, tf } from "./i18n.js";

const RESULT_FOLD_CHARS = 1500;
const RESULT_FOLD_LINES = 24;
const RETRY_COUNT = /\((\d+)\s*\/\s*(\d+)\)\s*$/;

export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "className") el.className = value;
    else if (key === "text") el.textContent = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else el.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined && child !== false) el.append(child);
  }
  return el;
}

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

function prettyJson(text) {
  if (typeof text !== "string") return JSON.stringify(text, null, 2);
  const trimmed = text.trim();
  if (!trimmed.startsWith("{") && !trimmed.startsWith("[")) return text;
  try {
    return JSON.stringify(JSON.parse(trimmed), null, 2);
  } catch {
    return text;
  }
}

function argumentsPreview(text) {
  let preview = text || "";
  try {
    const value = JSON.parse(preview);
    if (value && typeof value === "object" && !Array.isArray(value)) {
      const values = Object.values(value);
      preview = values.length === 1 && typeof values[0] === "string" ? values[0] : JSON.stringify(value);
    }
  } catch {
    // not JSON: show as sent
  }
  preview = preview.replace(/\s+/g, " ").trim();
  return preview.length > 80 ? `${preview.slice(0, 79)}…` : preview;
}

/** A <pre> with long text folded to its first lines and a button to show the rest. */
function foldedPre(text, className) {
  const pre = h("pre", { className });
  const lines = text.split("\n");
  const long = text.length > RESULT_FOLD_CHARS || lines.length > RESULT_FOLD_LINES;
  if (!long) {
    pre.textContent = text;
    return pre;
  }
  let head = lines.slice(0, RESULT_FOLD_LINES).join("\n");
  if (head.length > RESULT_FOLD_CHARS) head = head.slice(0, RESULT_FOLD_CHARS);
  pre.textContent = `${head}\n…`;
  pre.classList.add("folded");
  const more = h("button", {
    type: "button",
    className: "btn btn-small btn-ghost show-all",
    text: tf("Show all (%s characters)", [text.length.toLocaleString()]),
  });
  more.addEventListener("click", () => {
    pre.textContent = text;
    pre.classList.remove("folded");
    more.remove();
  });
  const wrap = h("div", { className: "fold-wrap" }, pre, more);
  return wrap;
}

function statusIcon(kind) {
  return h("span", { className: `status-icon ${kind}`, "aria-hidden": "true" });
}

// --- timeline items ------------------------------------------------------------------------
class ThinkingItem {
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

class ToolItem {
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
  end(frame) {
    this.status = frame.isError ? "failed" : "done";
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
      body.append(h("div", { className: "detail-label", text: this.status === "failed" ? t("Error") : t("Result") }),
        foldedPre(prettyJson(this.result), `tool-pre${this.status === "failed" ? " is-error" : ""}`));
    } else {
      body.append(h("div", { className: "detail-label muted", text: t("Waiting for the result…") }));
    }
    if (this.body) this.body.replaceWith(body);
    else this.details.append(body);
    this.body = body;
  }
  update() {
    this.el.dataset.status = this.status;
    this.icon.className = `status-icon ${this.status}`;
    this.meta.textContent = this.metaText();
    this.srStatus.textContent = ` (${this.metaText()})`;
    if (this.body) this.fillBody();
  }
}

class ErrorItem {
  constructor(frame) {
    this.kind = "error";
    this.code = frame.code || "ERROR";
    this.message = frame.message || frame.code || t("Error");
    this.detail = frame.detail || "";
    this.el = null;
  }
  get isCancel() {
    return this.code === "CANCELLED";
  }
  mount() {
    const retry = this.message.match(RETRY_COUNT);
    const title = h("div", { className: "tl-title" }, h("span", { text: this.message }));
    if (retry) {
      title.append(" ", h("span", { className: "badge badge-warn", text: tf("retry %s of %s", [retry[1], retry[2]]) }));
    }
    const body = h("div", { className: "tl-body" }, title,
      h("div", { className: "error-detail" }, h("code", { text: this.code }), this.detail ? ` ${this.detail}` : ""));
    this.el = h("li", { className: `tl-item tl-error${this.isCancel ? " is-cancel" : ""}`, role: "note" },
      statusIcon(this.isCancel ? "stopped" : "error"), body);
    return this.el;
  }
}

class ReferenceItem {
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

// --- the turn ------------------------------------------------------------------------------
export class Turn {
  constructor(runId) {
    this.runId = runId;
    this.userText = null;
    this.items = [];
    this.tools = new Map();
    this.text = "";
    this.attemptStart = 0; // where the current model call's text began
    this.status = null; // null while running, else the complete event's status
    this.hasError = false;
    this.el = null;
    this.renderedText = null;
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
      case "text":
        this.text += String(frame.content ?? "");
        if (this.el) scheduleAnswer(this);
        break;
      case "tool_start": {
        this.attemptStart = this.text.length;
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
        this.attemptStart = this.text.length; // the next model call starts after the tools
        break;
      }
      case "error": {
        const item = new ErrorItem(frame);
        if (!item.isCancel) this.hasError = true;
        if (item.code === "LLM_CALL_FAILED" && this.text.length > this.attemptStart) {
          // A failed model call's partial text is not part of the answer: the retry streams it anew.
          this.text = this.text.slice(0, this.attemptStart);
          if (this.el) scheduleAnswer(this);
        }
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
          scheduleAnswer(this);
          if (live) this.timeline.open = this.hasError;
        }
        break;
      default:
        return; // an event type this page does not know yet: ignored, as the protocol allows
    }
    if (this.el) this.updateSummary();
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
    this.timeline.open = this.running || this.hasError;
    this.answer = h("div", { className: "answer markdown" });
    this.statusLine = h("div", { className: "turn-status", role: "status" });
    this.el = h("article", { className: "turn", dataset: { runId: this.runId } },
      h("div", { className: "msg msg-user" }, h("div", { className: "visually-hidden", text: t("You said:") }), this.userBubble),
      h("div", { className: "msg msg-assistant" }, this.timeline, this.answer, this.statusLine));
    this.updateSummary();
    this.updateStatus();
    this.renderAnswer();
    return this.el;
  }

  updateSummary() {
    const tools = this.items.filter((i) => i.kind === "tool");
    const errors = this.items.filter((i) => i.kind === "error" && !i.isCancel);
    const thought = this.items.some((i) => i.kind === "thinking");
    this.el.classList.toggle("is-running", this.running);
    this.timeline.dataset.state = this.running ? "running" : this.hasError ? "error" : "done";
    this.timeline.hidden = !this.running && this.items.length === 0;
    if (this.running) {
      this.summaryIcon.className = "status-icon running";
      const last = this.items[this.items.length - 1];
      let label = t("Working…");
      if (last && last.kind === "tool" && last.status === "running") label = tf("Running %s…", [last.name]);
      else if (this.text) label = t("Writing the answer…");
      else if (last && last.kind === "thinking") label = t("Thinking…");
      else if (last && last.kind === "error") label = t("Retrying…");
      this.summaryLabel.textContent = label;
    } else {
      this.summaryIcon.className = `status-icon ${this.hasError ? "error" : this.status === "cancelled" ? "stopped" : "done"}`;
      if (this.hasError) this.summaryLabel.textContent = t("Finished with errors");
      else if (this.status === "cancelled") this.summaryLabel.textContent = t("Stopped");
      else this.summaryLabel.textContent = thought || tools.length ? t("Thought process") : t("Done");
    }
    const counts = [];
    if (tools.length) counts.push(tools.length === 1 ? t("1 tool call") : tf("%s tool calls", [tools.length]));
    if (errors.length) counts.push(errors.length === 1 ? t("1 error") : tf("%s errors", [errors.length]));
    this.summaryCounts.textContent = counts.length ? ` · ${counts.join(" · ")}` : "";
  }

  updateStatus() {
    const messages = {
      cancelled: t("Stopped."),
      failed: t("The run failed."),
      interrupted: t("Interrupted: the server stopped during this run."),
    };
    const message = messages[this.status] || "";
    this.statusLine.textContent = message;
    this.statusLine.hidden = !message;
    this.statusLine.dataset.status = this.status || "running";
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
