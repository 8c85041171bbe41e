// The page's conversation state: which conversation is open and where the user's message
// stands, as one named state changed only by the transitions below. The open
// ConversationView reports facts (loaded, running, connection) through observe(); the state
// follows them. Listeners get a "change" event after every transition or new facts, and an
// "unsent" event (detail: the message) when a queued first message could not go out.

export const State = Object.freeze({
  DRAFT: "draft", // no conversation open: the first message creates one
  CREATING: "creating", // that first message is creating its conversation
  LOADING: "loading", // a conversation is open; its history is being fetched and drawn
  QUEUED: "queued", // a new conversation is open; its first message waits for a live socket
  IDLE: "idle", // loaded and no run going: the user may write (when the socket is live)
  SENDING: "sending", // a message went out; waiting for its run to show up
  RUNNING: "running", // the agent is working on an answer
  STOPPING: "stopping", // Stop was pressed; waiting for the run to end
});

// A message whose run has not shown up by then is taken as lost: the user may try again.
const ECHO_TIMEOUT_MS = 15000;

export class ConversationState extends EventTarget {
  constructor() {
    super();
    this.name = State.DRAFT;
    this.view = null; // the open ConversationView
    this.facts = null; // its last report: {running, connection, synced, retryAt, loaded, turns}
    this.queued = null; // QUEUED: the first message
    this.lastSent = ""; // given back to the composer when the server refuses a message
    this.turnsAtSend = 0; // SENDING: a run that starts and ends in one batch shows as one more turn
    this.echoTimer = null;
  }

  get running() {
    return this.name === State.RUNNING || this.name === State.STOPPING;
  }

  /** The socket is open and caught up with the event log: what is sent now is seen at once. */
  get live() {
    return Boolean(this.facts && this.facts.connection === "open" && this.facts.synced);
  }

  // --- transitions -------------------------------------------------------------------------
  toDraft() {
    this.closeView();
    this.queued = null;
    this.enter(State.DRAFT);
  }

  create() {
    this.enter(State.CREATING);
  }

  createFailed() {
    if (this.name === State.CREATING) this.enter(State.DRAFT);
  }

  /** Opens `view` (not yet loading): with `firstMessage`, that message is sent once it is live. */
  open(view, firstMessage = null) {
    this.closeView();
    this.view = view;
    this.queued = firstMessage;
    this.enter(firstMessage ? State.QUEUED : State.LOADING);
  }

  /** The view's latest facts, and every transition they imply. */
  observe(facts) {
    const previous = this.name;
    this.facts = facts;
    let unsent = null;
    switch (this.name) {
      case State.LOADING:
        if (facts.loaded) this.go(facts.running ? State.RUNNING : State.IDLE);
        break;
      case State.QUEUED:
        if (facts.loaded && this.live && !facts.running && !this.trySend(this.queued)) {
          unsent = this.queued;
          this.queued = null;
          this.go(State.IDLE);
        }
        break;
      case State.IDLE:
        if (facts.running) this.go(State.RUNNING);
        break;
      case State.SENDING:
        // The echo of what we sent: a run that started, or even finished when its frames came in one batch.
        if (facts.running) this.go(State.RUNNING);
        else if (facts.turns > this.turnsAtSend) this.go(State.IDLE);
        break;
      case State.RUNNING:
      case State.STOPPING:
        if (!facts.running) this.go(State.IDLE);
        break;
      default:
        break; // DRAFT, CREATING: no view reports
    }
    this.changed(previous);
    if (unsent !== null) this.dispatchEvent(new CustomEvent("unsent", { detail: unsent }));
  }

  /** Sends a message (with the paths of its uploaded files) on the open conversation's socket;
   * false when it could not go out. */
  send(content, attachments = []) {
    const previous = this.name;
    if (!this.trySend(content, null, attachments)) return false;
    this.changed(previous);
    return true;
  }

  /** Sends an edit or regenerate frame (a new version of a turn) when a message could be sent
   * now; `text` is what the composer gets back if the server refuses it. False when not sent. */
  sendVersion(frame, text) {
    if (this.name !== State.IDLE || !this.live) return false;
    const previous = this.name;
    if (!this.trySend(text, frame)) return false;
    this.changed(previous);
    return true;
  }

  /** While a run works: sends a message that waits for it to end, and starts the next run by
   * itself (docs/protocol.md, "Queued messages"); the state stays. False when it could not go out. */
  queue(content, attachments = []) {
    if (!this.running || !this.live || !this.view.queueMessage(content, attachments)) return false;
    this.lastSent = content;
    return true;
  }

  /** While a run works: hands it a message that it reads before its next model call
   * (docs/protocol.md, "Steering"); the state stays. False when it could not go out. */
  steer(content) {
    if (!this.running || !this.live || !this.view.steerMessage(content)) return false;
    this.lastSent = content;
    return true;
  }

  /** Withdraws a waiting message or a steer not read yet. */
  unqueue(queueId) {
    return Boolean(this.view && this.live && this.view.unqueue(queueId));
  }

  /** The messages waiting for the run to end: [{queueId, content}]. */
  get waiting() {
    return (this.facts && this.facts.waiting) || [];
  }

  /** The server refused what this socket sent (a transient error frame). */
  refused() {
    if (this.name === State.SENDING) this.enter(State.IDLE);
  }

  /** Stops the run; `clearQueue`: the waiting messages are withdrawn too, none starts after it. */
  stop(clearQueue = false) {
    if (this.name === State.RUNNING && this.view.cancel(clearQueue)) this.enter(State.STOPPING);
  }

  // --- internals ---------------------------------------------------------------------------
  trySend(content, frame = null, attachments = []) {
    if (!this.view || !(frame ? this.view.sendFrame(frame) : this.view.send(content, attachments))) return false;
    this.lastSent = content;
    this.turnsAtSend = this.facts ? this.facts.turns : 0;
    this.queued = null;
    this.go(State.SENDING);
    this.echoTimer = setTimeout(() => this.enter(State.IDLE), ECHO_TIMEOUT_MS);
    return true;
  }

  closeView() {
    if (this.view) this.view.close();
    this.view = null;
    this.facts = null;
  }

  enter(name) {
    const previous = this.name;
    this.go(name);
    this.changed(previous);
  }

  go(name) {
    clearTimeout(this.echoTimer); // only SENDING waits for an echo, and each send starts its own wait
    this.name = name;
  }

  changed(previous) {
    this.dispatchEvent(new CustomEvent("change", { detail: { previous } }));
  }
}
