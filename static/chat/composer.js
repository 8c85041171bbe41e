// The message box and its buttons: whether a message may be written and sent in the current
// conversation state (and why not), Enter to send, Stop, the suggestions of an empty
// conversation, and the message given back when it could not be sent.
import { State } from "./conversation-state.js";
import { showNotice } from "./notices.js";
import { t } from "./i18n.js";

const MAX_HEIGHT_PX = 240;

// The message or the cause of a refusal, by the error frame's code.
function refusalText(frame) {
  const messages = {
    RUN_IN_PROGRESS: t("The agent is still working on the previous message."),
    TOO_LARGE: t("The message is too long."),
    RATE_LIMITED: t("Too many messages. Please wait a moment."),
    BAD_REQUEST: t("The server did not accept that message."),
    AGENT_UNAVAILABLE: t("This conversation's agent is no longer available to you; pick another."),
  };
  return messages[frame.code] || frame.message || t("Something went wrong.");
}

export class Composer {
  /**
   * @param {ConversationState} state
   * @param {object} hooks  startConversation(content): a draft's first message was submitted
   */
  constructor(state, hooks) {
    this.state = state;
    this.hooks = hooks;
    this.form = document.getElementById("composer");
    this.input = document.getElementById("message-input");
    this.sendButton = document.getElementById("send-button");
    this.stopButton = document.getElementById("stop-button");
    this.reason = document.getElementById("composer-reason");
    state.addEventListener("change", (event) => this.onChange(event.detail.previous));
    state.addEventListener("unsent", (event) => this.unsent(event.detail));
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.submit();
    });
    this.input.addEventListener("keydown", (event) => {
      // isComposing: Enter that confirms an IME candidate (Chinese input) must not send.
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
        event.preventDefault();
        this.submit();
      }
    });
    this.input.addEventListener("input", () => {
      this.autosize();
      this.render();
    });
    this.stopButton.addEventListener("click", () => state.stop());
    for (const button of document.querySelectorAll("[data-suggestion]")) {
      button.addEventListener("click", () => {
        this.input.value = button.dataset.suggestion;
        this.autosize();
        this.render();
        this.input.focus();
      });
    }
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
        return t("The agent is working on an answer. Wait for it, or press Stop.");
      case State.STOPPING:
        return t("Stopping…");
      case State.IDLE:
        return state.live ? "" : t("Not connected. Your message can be sent when the connection is back.");
      default:
        return ""; // DRAFT, CREATING (whose input is locked instead)
    }
  }

  render() {
    const { state } = this;
    const block = this.blockReason();
    this.reason.textContent = block;
    this.reason.hidden = !block;
    this.form.dataset.blocked = String(Boolean(block));
    // A message of ours in flight, or a run going: what is typed now could not be sent.
    this.input.disabled = [State.CREATING, State.QUEUED, State.SENDING, State.RUNNING, State.STOPPING].includes(state.name);
    this.input.setAttribute("aria-describedby", block ? "composer-reason composer-hint" : "composer-hint");
    this.sendButton.disabled = Boolean(block) || this.input.value.trim() === "";
    this.sendButton.hidden = state.running;
    this.stopButton.hidden = !state.running;
    this.stopButton.disabled = state.name === State.STOPPING || !(state.facts && state.facts.connection === "open");
  }

  onChange(previous) {
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

  submit() {
    const content = this.input.value.trim();
    const { name } = this.state;
    if (!content || this.blockReason() || (name !== State.DRAFT && name !== State.IDLE)) return;
    this.input.value = "";
    this.autosize();
    if (name === State.DRAFT) this.hooks.startConversation(content);
    else if (!this.state.send(content)) this.unsent(content);
  }

  /** Puts a message that did not go through back into an empty input. */
  giveBack(content) {
    if (content && !this.input.value) {
      this.input.value = content;
      this.autosize();
    }
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
