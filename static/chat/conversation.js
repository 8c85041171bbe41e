// One open conversation: its history, its live socket and its turns.
//
// Events are applied strictly in seq order, each exactly once: a frame at or below
// lastSeq was seen already and is dropped; a frame beyond lastSeq+1 waits in `pending`
// while the missing ones are fetched over HTTP (the server fills gaps too; this is the
// page's own safety net). History is fetched first and drawn in batches, newest turns
// first; the socket then resumes with ?after=<lastSeq>, so nothing is missed or doubled.
//
// Versions (edits, regenerated answers) are derived from the user_messages alone, by the
// version tree (versions.js); the turns off the branch being viewed are hidden. The version the
// user switched to is kept on the server (the conversation's `viewed_seq`), so that a reload or
// another device opens on it; a new turn clears it there, as it becomes the one viewed here.
import { api, ApiError } from "./api.js";
import { CompactionRow, turnCompletedAt } from "./compaction-row.js";
import { ChildRuns } from "./child-run.js";
import { mountInSlices } from "./slices.js";
import { ChatSocket, CLOSE_NOT_FOUND, CLOSE_NOT_LOGGED_IN } from "./socket.js";
import { Turn } from "./timeline.js";
import { VersionTree } from "./versions.js";

export class ConversationView {
  /**
   * @param {string} id
   * @param {HTMLElement} container  the scrolling list the turns are drawn into
   * @param {object} hooks  onState({running, connection, ...}), onNotice(text, kind),
   *                        onGone(), onRunFinished(), onScroll(force), onTitle(title)
   */
  constructor(id, container, hooks) {
    this.id = id;
    this.container = container;
    this.hooks = hooks;
    this.turns = new Map();
    this.order = [];
    this.lastSeq = 0;
    this.pending = new Map();
    this.filling = false;
    this.mounted = false; // until the history is drawn, turns only collect state
    this.closed = false;
    this.connection = "connecting";
    this.retryAt = 0;
    this.synced = false;
    this.abort = new AbortController();
    this.socket = null;
    this.historyMs = null;
    this.tree = new VersionTree();
    // The messages waiting for the run to end (docs/protocol.md, "Queued messages"), by queueId,
    // in the order they will start: from their `queued` events, gone at their `unqueued` or at
    // the `user_message` of the run they start.
    this.waiting = new Map();
    // The turn each steer was sent to, by queueId (docs/protocol.md, "Steering"): told when the
    // steer is withdrawn or, not read in time, becomes a waiting message.
    this.steerTurns = new Map();
    this.choiceSaved = Promise.resolve(); // choices go out one after the other, the last one wins
    this.turnActions = {
      edit: (turn, content) => this.hooks.onVersionFrame({ type: "edit", seq: turn.seq, content }, content),
      regenerate: (turn) => this.hooks.onVersionFrame({ type: "regenerate", seq: turn.seq }, ""),
      // A new message asking for the rest: the model sees its cut answer in the memory.
      continueAnswer: () => this.hooks.onContinue(),
      showVersion: (turn, step, kind) => this.showVersion(turn, step, kind),
      approve: (toolCallId, decision, reason) =>
        this.sendFrame(reason ? { type: "approve", toolCallId, decision, reason } : { type: "approve", toolCallId, decision }),
      connection: () => this.connection,
      unqueue: (queueId) => this.unqueue(queueId),
      fileUrl: (path) => api.fileUrl(this.id, path),
      thumbnailUrl: (path) => api.thumbnailUrl(this.id, path),
    };
    // Sub-agents' runs, drawn inside their delegate calls' cards (docs/protocol.md, "Sub-agents").
    this.children = new ChildRuns(this.turns, this.turnActions);
  }

  get running() {
    const last = this.order[this.order.length - 1];
    return Boolean(last && last.running);
  }

  get currentRunId() {
    const last = this.order[this.order.length - 1];
    return last && last.running ? last.runId : null;
  }

  async open() {
    const started = performance.now();
    this.emitState();
    let history = [];
    // Ratings are extras: a page without them still shows the conversation.
    const feedback = api.feedback(this.id, this.abort.signal).catch(() => []);
    // So is the version chosen last time: without it, the newest branch.
    const chosen = api.getConversation(this.id, this.abort.signal).then((c) => c.viewed_seq, () => null);
    try {
      history = await api.events(this.id, 0, this.abort.signal);
    } catch (error) {
      if (this.closed) return;
      if (error instanceof ApiError && error.status === 404) {
        this.hooks.onGone();
        return;
      }
      // The socket replays the whole history as well; carry on without the fast path.
      history = [];
    }
    if (this.closed) return;
    this.container.dataset.historyFetchMs = String(Math.round(performance.now() - started));
    this.ingest(history, false);
    const seq = await chosen;
    if (this.closed) return;
    if (Number.isInteger(seq) && this.tree.view(seq)) this.tree.layout(this.order);
    for (const each of await feedback) {
      const turn = this.turns.get(each.runId);
      if (turn) turn.feedback.set(each);
    }
    if (this.closed) return;
    await this.mountHistory();
    if (this.closed) return;
    this.historyMs = performance.now() - started;
    this.container.dataset.historyMs = String(Math.round(this.historyMs));
    this.container.dataset.historyEvents = String(history.length);
    performance.mark("agentsite:history-rendered");
    this.connectSocket();
  }

  connectSocket() {
    this.socket = new ChatSocket(this.id, {
      afterSeq: () => this.lastSeq,
      onFrame: (frame) => this.onFrame(frame),
      onState: (state, info) => {
        this.connection = state;
        if (state === "waiting") this.retryAt = info.until;
        if (state !== "open") this.synced = false;
        this.emitState();
        // Only the running turn, the last one, can have a request waiting.
        this.order[this.order.length - 1]?.connectionChanged();
      },
      onRefused: (code) => this.onRefused(code),
    });
    this.socket.connect();
  }

  async onRefused(code) {
    if (code === CLOSE_NOT_LOGGED_IN) {
      // The socket's session ended, but the browser may still be signed in under a new key
      // (a password change moves the session to one). HTTP tells; once per healthy socket,
      // so that a server refusing every socket cannot make the page loop.
      if (!this.reopenedAfterRevocation && (await api.stillSignedIn(this.id, this.abort.signal))) {
        if (this.closed) return;
        this.reopenedAfterRevocation = true;
        this.connectSocket();
        return;
      }
      if (!this.closed) window.location.assign("/accounts/login/");
      return;
    }
    if (code === CLOSE_NOT_FOUND) {
      this.hooks.onGone();
      return;
    }
    try {
      await api.getConversation(this.id); // 404 -> gone; lapsed session -> login
    } catch (error) {
      if (error instanceof ApiError && error.status === 404 && !this.closed) this.hooks.onGone();
    }
  }

  onFrame(frame) {
    if (this.closed) return;
    if (frame.type === "sync") {
      this.synced = true;
      this.reopenedAfterRevocation = false;
      if (Number(frame.lastSeq) > this.lastSeq) this.fillGap();
      this.followQueue(Array.isArray(frame.queue) ? frame.queue : []);
      this.emitState();
      return;
    }
    if (typeof frame.seq !== "number") {
      // Transient answers to this socket alone (RUN_IN_PROGRESS, BAD_REQUEST, ...), and the
      // conversation's generated title (sent once, never replayed).
      if (frame.type === "error") this.hooks.onNotice(frame, "error");
      else if (frame.type === "title" && typeof frame.title === "string") this.hooks.onTitle(frame.title);
      return;
    }
    this.ingest([frame], true);
  }

  /** Queues events and applies every one that is next in line. */
  ingest(frames, live) {
    for (const frame of frames) {
      if (typeof frame.seq === "number" && frame.seq > this.lastSeq) this.pending.set(frame.seq, frame);
    }
    const wasRunning = this.running;
    let applied = 0;
    while (this.pending.has(this.lastSeq + 1)) {
      const frame = this.pending.get(this.lastSeq + 1);
      this.pending.delete(this.lastSeq + 1);
      this.lastSeq = frame.seq;
      this.applyEvent(frame, live);
      applied += 1;
    }
    if (this.pending.size > 0 && !this.filling) this.fillGap();
    if (this.tree.changed) this.tree.layout(this.order);
    if (applied && this.mounted) {
      this.emitState();
      this.hooks.onScroll(false);
      if (wasRunning && !this.running) this.hooks.onRunFinished();
    }
  }

  applyEvent(frame, live) {
    // queued / unqueued belong to the conversation, not to a turn (runId null): the composer
    // shows what waits, and a waiting message shows as the turn it starts.
    if (frame.runId === null && frame.type === "queued") {
      const item = { queueId: frame.queueId, content: frame.content || "", steered: Boolean(frame.steered) };
      // A steer its run ended without starts before the messages queued earlier.
      const waiting = [...this.waiting.values()];
      const at = item.steered ? waiting.findIndex((other) => !other.steered) : -1;
      if (at >= 0) waiting.splice(at, 0, item);
      else waiting.push(item);
      this.waiting = new Map(waiting.map((entry) => [entry.queueId, entry]));
      this.steerTurns.get(frame.queueId)?.steerLeft(frame.queueId, "waiting");
      return;
    }
    if (frame.runId === null && frame.type === "unqueued") {
      this.waiting.delete(frame.queueId);
      this.steerTurns.get(frame.queueId)?.steerLeft(frame.queueId, frame.reason);
      return;
    }
    if (frame.type === "compaction") {
      turnCompletedAt(this.order, frame.throughSeq)?.addCompaction(new CompactionRow(frame));
      return;
    }
    if (this.children.apply(frame, live && this.mounted)) return;
    if (frame.type === "user_message" && frame.queueId) this.waiting.delete(frame.queueId);
    const runId = frame.runId || "unknown";
    let turn = this.turns.get(runId);
    // A compaction run (docs/protocol.md, "Compaction") has no user_message: it is no turn; its
    // summary is drawn after the turn it ends at (above).
    if (!turn && frame.type !== "user_message") return;
    if (!turn) {
      turn = new Turn(runId, this.turnActions);
      this.turns.set(runId, turn);
      this.order.push(turn);
      if (frame.type === "user_message") this.tree.place(turn, frame);
      if (this.mounted) {
        this.container.append(turn.mount());
        turn.apply(frame, live);
        if (frame.type === "user_message") this.hooks.onScroll(true);
        return;
      }
    }
    if (frame.type === "steer") this.steerTurns.set(frame.queueId, turn);
    turn.apply(frame, live && this.mounted);
  }

  /** Switches a turn's question or answer (`kind`) to its previous (-1) or next (+1) version,
   * without a reload, and keeps the choice for the next load. */
  showVersion(turn, step, kind) {
    if (!this.tree.step(turn, step, kind)) return;
    // The switch pressed is the hidden version's: the focus moves to the shown one's, or a
    // keyboard user would be dropped at the top of the page.
    const hadFocus = Boolean(turn.el && turn.el.contains(document.activeElement));
    this.tree.layout(this.order);
    const shown = this.tree.bySeq.get(this.tree.target);
    if (hadFocus && shown) (kind === "answer" ? shown.answerVersionSwitcher : shown.questionVersions).focus(step);
    this.emitState();
    const seq = this.tree.target;
    // Not kept (offline, say): the next load shows the newest branch, nothing else is lost.
    this.choiceSaved = this.choiceSaved.then(() => api.viewVersion(this.id, seq)).catch(() => {});
  }

  /** The seq of the last turn of the branch being viewed (what a new message follows). */
  get viewedLeafSeq() {
    for (let i = this.order.length - 1; i >= 0; i -= 1) {
      const turn = this.order[i];
      if (turn.seq !== null && turn.shown) return turn.seq;
    }
    return null;
  }

  async fillGap() {
    if (this.filling || this.closed) return;
    this.filling = true;
    try {
      for (let tries = 0; tries < 5 && !this.closed; tries += 1) {
        const missing = await api.events(this.id, this.lastSeq, this.abort.signal);
        if (this.closed) return;
        this.ingest(missing, true);
        if (this.pending.size === 0) return;
        await new Promise((resolve) => setTimeout(resolve, 300 * (tries + 1)));
      }
    } catch {
      // The next frame or the next reconnect tries again.
    } finally {
      this.filling = false;
    }
  }

  /** Draws the turns collected so far, the newest first (slices.js); the conversation is
   * loaded once they are in. */
  mountHistory() {
    return mountInSlices(this.order, this.container, {
      newestDrawn: () => {
        this.mounted = true;
        this.emitState();
        this.hooks.onScroll(true);
      },
      olderDrawn: () => this.hooks.onScroll(false),
      closed: () => this.closed,
    });
  }

  /** After a reconnect, what waits is what `sync` says: one withdrawn meanwhile leaves, one
   * queued before the events this page read is fetched (its `queued` event was not among them). */
  followQueue(ids) {
    for (const queueId of [...this.waiting.keys()]) if (!ids.includes(queueId)) this.waiting.delete(queueId);
    if (ids.every((queueId) => this.waiting.has(queueId))) return;
    api
      .queue(this.id, this.abort.signal)
      .then((answer) => {
        if (this.closed) return;
        const known = new Map((answer.queue || []).map((item) => [item.queueId, item]));
        this.waiting = new Map(
          ids.filter((queueId) => known.has(queueId)).map((queueId) => [queueId, { queueId, content: known.get(queueId).content || "" }]),
        );
        this.emitState();
      })
      .catch(() => {});
  }

  /** Sends a message to wait for the run in progress (it follows the newest turn when it starts). */
  queueMessage(content, attachments = []) {
    const frame = { type: "message", content, whileRunning: "queue" };
    if (attachments.length) frame.attachments = attachments;
    return this.sendFrame(frame);
  }

  /** Hands a message to the run in progress: it reads it before its next model call. */
  steerMessage(content) {
    return this.sendFrame({ type: "message", content, whileRunning: "steer" });
  }

  /** Withdraws a waiting message or a steer not read yet. */
  unqueue(queueId) {
    return this.sendFrame({ type: "unqueue", queueId });
  }

  /** Sends a message that continues the branch being viewed, naming its uploaded files. */
  send(content, attachments = []) {
    const frame = { type: "message", content };
    const parentSeq = this.viewedLeafSeq;
    if (parentSeq !== null) frame.parentSeq = parentSeq;
    if (attachments.length) frame.attachments = attachments;
    return this.sendFrame(frame);
  }

  sendFrame(frame) {
    if (!this.socket || !this.socket.isOpen) return false;
    return this.socket.send(frame);
  }

  /** Stops the run; `clearQueue`: withdraws every waiting message first, so none starts after it. */
  cancel(clearQueue = false) {
    return Boolean(this.socket && this.socket.send(clearQueue ? { type: "cancel", clearQueue: true } : { type: "cancel" }));
  }

  reconnectNow() {
    if (this.socket) this.socket.retryNow();
  }

  emitState() {
    this.hooks.onState({
      running: this.running,
      awaitingApproval: Boolean(this.order[this.order.length - 1]?.awaitingApproval),
      runId: this.currentRunId,
      connection: this.connection,
      synced: this.synced,
      retryAt: this.retryAt,
      loaded: this.mounted,
      turns: this.order.length,
      waiting: [...this.waiting.values()],
      // What the next message starts from: the newest shown turn that says so.
      context: [...this.order].reverse().find((turn) => turn.shown && turn.context)?.context ?? null,
    });
  }

  close() {
    this.closed = true;
    this.abort.abort();
    if (this.socket) this.socket.close();
  }
}
