// The message box and its buttons: whether a message may be sent in the current conversation
// state (and why not), Enter to send, Stop and Escape, the suggestions of an empty
// conversation, and the message given back when it could not be sent. The box itself is never
// locked: while an answer streams the user keeps the focus and writes the next message, and
// sending it queues it (docs/protocol.md, "Queued messages"): it shows above the box, with a
// button to withdraw it, until the answer ends and it starts the next turn. Steer (Ctrl/Cmd+Enter)
// hands it to the running agent instead, which reads it before its next step ("Steering"): it
// shows in the running turn.
import { Attachments } from "./attachments.js";
import { State } from "./conversation-state.js";
import { h } from "./dom.js";
import { icon } from "./icons.js";
import { showNotice } from "./notices.js";
import { t, tf } from "./i18n.js";

const MAX_HEIGHT_PX = 240;

// The message or the cause of a refusal, by the error frame's code.
function refusalText(frame) {
  const messages = {
    RUN_IN_PROGRESS: t("The agent is still working on the previous message."),
    TOO_LARGE: t("The message is too long."),
    RATE_LIMITED: t("Too many messages. Please wait a moment."),
    BAD_REQUEST: t("The server did not accept that message."),
    AGENT_UNAVAILABLE: t("This conversation's agent is no longer available to you; pick another."),
    QUEUE_FULL: t("Too many messages are waiting. Wait for one to start, or withdraw one."),
    NOT_QUEUED: t("That message has already started or was withdrawn."),
  };
  // An attachment that is not there says which one.
  if (frame.code === "BAD_REQUEST" && frame.detail && frame.detail.startsWith("attachment ")) {
    return `${frame.message} ${frame.detail}`;
  }
  return messages[frame.code] || frame.message || t("Something went wrong.");
}

export class Composer {
  /**
   * @param {ConversationState} state
   * @param {object} hooks  startConversation(content): a draft's first message was submitted;
   *                        ensureConversation(fileNames): the open conversation's id, a draft's
   *                        created first (files are uploaded into it, and name it);
   *                        onFilesChanged(): a file was uploaded;
   *                        imageless(): the name of the chosen agent when its model is not
   *                        shown images, else "" (a notice says so when one is attached)
   */
  constructor(state, hooks) {
    this.state = state;
    this.hooks = hooks;
    this.form = document.getElementById("composer");
    this.input = document.getElementById("message-input");
    this.sendButton = document.getElementById("send-button");
    this.stopButton = document.getElementById("stop-button");
    this.steerButton = document.getElementById("steer-button");
    this.clearButton = document.getElementById("stop-clear-button");
    this.queueRow = document.getElementById("queue-row");
    this.queueList = document.getElementById("queue-list");
    this.reason = document.getElementById("composer-reason");
    this.attachNote = document.getElementById("attach-note");
    this.fileInput = document.getElementById("attach-input");
    this.lastAttachments = [];
    this.attachments = new Attachments(document.getElementById("attachment-list"), {
      conversationId: (fileNames) => hooks.ensureConversation(fileNames),
      onChange: () => this.render(),
      onError: (text) => showNotice(text),
      onUploaded: () => hooks.onFilesChanged(),
    });
    this.watchFiles();
    state.addEventListener("change", (event) => {
      this.attachments.follow(state.view ? state.view.id : null);
      this.onChange(event.detail.previous);
    });
    state.addEventListener("unsent", (event) => this.unsent(event.detail));
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    this.input.addEventListener("keydown", (event) => {
      // isComposing: Enter that confirms an IME candidate (Chinese input) must not send.
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
        event.preventDefault();
        if ((event.ctrlKey || event.metaKey) && this.state.running) this.submit({ steer: true });
        else this.submit();
      }
    });
    this.input.addEventListener("input", () => {
      this.autosize();
      this.render();
    });
    this.stopButton.addEventListener("click", () => state.stop());
    this.steerButton.addEventListener("click", () => {
      this.submit({ steer: true });
      this.input.focus();
    });
    this.clearButton.addEventListener("click", () => state.stop(true));
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && this.escapeStops(event)) {
        event.preventDefault();
        state.stop();
      }
    });
    // A suggestion is sent as it is, like a message typed and sent; when nothing can be sent
    // now it waits in the box instead.
    for (const button of document.querySelectorAll("[data-suggestion]")) {
      button.addEventListener("click", () => {
        const text = button.dataset.suggestion;
        if (this.canSend(text)) {
          this.dispatch(text);
        } else {
          this.input.value = text;
          this.autosize();
          this.render();
        }
        this.input.focus();
      });
    }
  }

  /** Escape stops a run when the focus is in the message box or on no control of the page; not
   * in a dialog, the drawer or a menu, nor in another field (which uses Escape to cancel). */
  escapeStops(event) {
    if (event.defaultPrevented || event.isComposing || this.state.name !== State.RUNNING) return false;
    if (document.querySelector("dialog[open]") || document.body.classList.contains("drawer-open")) return false;
    if (document.querySelector(".menu:not([hidden])")) return false;
    const target = event.target;
    return this.form.contains(target) || target === document.body || target === document.documentElement
      || target.id === "messages-scroll";
  }

  /** Files come from the paperclip, a drop onto the composer, or a paste into the message box. */
  watchFiles() {
    this.fileInput.addEventListener("change", () => {
      const files = [...this.fileInput.files];
      this.fileInput.value = "";
      this.attachments.add(files);
    });
    let depth = 0; // dragenter/dragleave fire for every child the pointer crosses
    const dragging = (on) => this.form.classList.toggle("is-dropping", on);
    const hasFiles = (event) => Boolean(event.dataTransfer && [...event.dataTransfer.types].includes("Files"));
    this.form.addEventListener("dragenter", (event) => {
      if (!hasFiles(event)) return;
      event.preventDefault();
      depth += 1;
      dragging(true);
    });
    this.form.addEventListener("dragover", (event) => {
      if (hasFiles(event)) event.preventDefault();
    });
    this.form.addEventListener("dragleave", () => {
      depth = Math.max(0, depth - 1);
      if (depth === 0) dragging(false);
    });
    this.form.addEventListener("drop", (event) => {
      if (!hasFiles(event)) return;
      event.preventDefault();
      depth = 0;
      dragging(false);
      this.attachments.add(event.dataTransfer.files);
    });
    this.input.addEventListener("paste", (event) => {
      const files = event.clipboardData ? [...event.clipboardData.files] : [];
      if (!files.length) return; // plain text pastes as usual
      event.preventDefault();
      this.attachments.add(files);
    });
  }

  /** Why nothing can be sent now ("" when a message can be). */
  blockReason() {
    const { state } = this;
    switch (state.name) {
      case State.LOADING:
        return t("Loading the conversation…");
      case State.QUEUED:
        return state.facts && state.facts.loaded ? t("Sending…") : t("Loading the conversation…");
      case State.SENDING:
        return t("Sending…");
      case State.RUNNING:
        return state.live ? "" : t("Not connected. Your message can be sent when the connection is back.");
      case State.STOPPING:
        return t("Stopping…");
      case State.IDLE:
        return state.live ? "" : t("Not connected. Your message can be sent when the connection is back.");
      default:
        return ""; // DRAFT, CREATING (whose input is locked instead)
    }
  }

  /** What a user writing during a run should know (nothing blocks them: what they send waits). */
  runningNote() {
    const { state } = this;
    if (state.name !== State.RUNNING) return "";
    if (state.facts && state.facts.awaitingApproval) {
      return t("The agent is waiting for your decision: approve or deny its request above, or press Stop.");
    }
    return t("Enter queues your message for after this answer; Steer (Ctrl+Enter) hands it over now.");
  }

  render() {
    const { state } = this;
    const block = this.blockReason();
    const said = block || this.runningNote();
    if (this.reason.textContent !== said) this.reason.textContent = said;
    this.reason.hidden = !said;
    this.form.dataset.blocked = String(Boolean(block));
    this.input.setAttribute("aria-describedby", block ? "composer-reason composer-hint" : "composer-hint");
    // Text or a file alone is a message. While a run goes on, Send queues it; Stop is beside it.
    this.sendButton.disabled = !this.canSend(this.input.value.trim());
    this.sendButton.title = state.running ? t("Waits for the answer in progress, then starts") : "";
    if (block) this.sendButton.setAttribute("aria-describedby", "composer-reason");
    else this.sendButton.removeAttribute("aria-describedby");
    // Said before sending: an image attached for an agent that will not see it.
    const blind = this.attachments.hasImages ? this.hooks.imageless() : "";
    const note = blind ? tf("%s does not accept images: it will get the file's name, not the picture.", [blind]) : "";
    if (this.attachNote.textContent !== note) this.attachNote.textContent = note;
    this.attachNote.hidden = !note;
    this.fileInput.disabled = state.name === State.CREATING;
    this.fileInput.parentElement.classList.toggle("is-disabled", this.fileInput.disabled);
    this.stopButton.hidden = !state.running;
    // A steer is text the agent reads next: files go with a queued message.
    this.steerButton.hidden = !state.running;
    this.steerButton.disabled = !this.canSteer(this.input.value.trim());
    this.steerButton.title = this.attachments.paths.length
      ? t("Files go with a queued message: press Enter")
      : t("Hand this to the agent now: it reads it before its next step (Ctrl+Enter)");
    this.stopButton.disabled = state.name === State.STOPPING || !(state.facts && state.facts.connection === "open");
    this.renderQueue();
  }

  /** The waiting messages, a chip each with its button to withdraw it; with any, Stop may clear them too. */
  renderQueue() {
    const waiting = this.state.view ? this.state.waiting : [];
    const key = waiting.map((item) => item.queueId).join(" ");
    this.clearButton.hidden = !(this.state.name === State.RUNNING && waiting.length);
    this.clearButton.disabled = this.stopButton.disabled;
    if (this.queueList.dataset.key === key) return;
    this.queueList.dataset.key = key;
    this.queueList.replaceChildren(
      ...waiting.map((item) => {
        const text = item.content || t("(files only)");
        const remove = h(
          "button",
          { type: "button", className: "chip-remove", "aria-label": tf("Withdraw: %s", [text]), title: t("Withdraw") },
          icon("close"),
        );
        remove.addEventListener("click", () => {
          if (!this.state.unqueue(item.queueId)) showNotice(t("Not connected. The message still waits."));
        });
        return h("li", { className: "chip queued-chip" }, h("span", { className: "chip-name", text, title: text }), remove);
      }),
    );
    this.queueRow.hidden = waiting.length === 0;
  }

  onChange(previous) {
    if (this.state.name === State.RUNNING) this.lastAttachments = []; // the message went through
    this.render();
    const runEnded = (previous === State.RUNNING || previous === State.STOPPING) && this.state.name === State.IDLE;
    if (runEnded && document.activeElement === document.body) this.input.focus();
  }

  autosize() {
    this.input.style.height = "auto";
    this.input.style.height = `${Math.min(this.input.scrollHeight, MAX_HEIGHT_PX)}px`;
  }

  focus() {
    this.input.focus();
  }

  /** Whether `content` (with the files attached, which may go alone) could be sent now. */
  canSend(content) {
    const { name } = this.state;
    if (name !== State.DRAFT && name !== State.IDLE && name !== State.RUNNING) return false;
    if (this.blockReason() || this.attachments.uploading) return false;
    return Boolean(content) || this.attachments.paths.length > 0;
  }

  /** Whether `content` could steer the run in progress now (text only). */
  canSteer(content) {
    return this.state.name === State.RUNNING && this.canSend(content) && Boolean(content) && this.attachments.paths.length === 0;
  }

  /** Sends what the box holds; `steer`: to the running agent rather than after it. */
  submit({ steer = false } = {}) {
    const content = this.input.value.trim();
    if (!(steer ? this.canSteer(content) : this.canSend(content))) return;
    this.input.value = "";
    this.autosize();
    if (steer) {
      this.lastAttachments = [];
      if (!this.state.steer(content)) this.unsent(content);
      this.render();
      return;
    }
    this.dispatch(content);
  }

  /** Sends `content` and the files attached (canSend said it may). */
  dispatch(content) {
    // A draft has no files: attaching one opens its conversation first.
    if (this.state.name === State.DRAFT) {
      this.hooks.startConversation(content);
      return;
    }
    const attachments = this.attachments.take();
    this.lastAttachments = attachments;
    const sent = this.state.running ? this.state.queue(content, attachments) : this.state.send(content, attachments);
    if (!sent) this.unsent(content);
  }

  /** Puts a message that did not go through back into the input, with its files: before what
   * was typed since (the box stays open while a message is on its way), so neither is lost. */
  giveBack(content) {
    if (content && !this.input.value.startsWith(content)) {
      this.input.value = [content, this.input.value].filter(Boolean).join("\n\n");
      this.autosize();
    }
    this.attachments.restore(this.attachments.conversationId, this.lastAttachments);
    this.lastAttachments = [];
    this.render();
  }

  unsent(content) {
    showNotice(t("Not connected. Your message was not sent."));
    this.giveBack(content);
  }

  /** The server refused what the socket sent (a transient error frame). */
  refused(frame) {
    if (frame.code === "ALREADY_ANSWERED") {
      // An approval answered elsewhere first: not about the message box; its card shows the outcome.
      showNotice(t("That request was already answered."));
      return;
    }
    this.state.refused();
    this.giveBack(this.state.lastSent);
    showNotice(refusalText(frame));
  }
}
