// One conversation's WebSocket (docs/protocol.md, "The WebSocket"): connects with ?after=<last seq>,
// reconnects with backoff when it drops, and notices a dead connection by pinging.

// The waits of the second reconnect attempt on, +-50%: handshakes that failed together (a server
// swamped by a restart's reconnects) must not come back together either.
const BACKOFF_MS = [1000, 2000, 4000, 8000, 15000];
// The first reconnect after a drop, spread over this window: when a server restarts, every page
// of it drops at the same moment, and at 500 ms +-20% thousands of handshakes landed within
// 200 ms, queued on the server together and missed its connect timeout together.
const FIRST_RETRY_MIN_MS = 250;
const FIRST_RETRY_SPREAD_MS = 2000;
const PING_EVERY_MS = 20000;
const SILENCE_LIMIT_MS = 45000;

export const CLOSE_NOT_LOGGED_IN = 4401;
export const CLOSE_NOT_FOUND = 4404;

/** The wait before reconnect attempt `attempt` (0 first); `random` in [0, 1). */
export function reconnectDelayMs(attempt, random = Math.random) {
  if (attempt === 0) return Math.round(FIRST_RETRY_MIN_MS + random() * FIRST_RETRY_SPREAD_MS);
  const base = BACKOFF_MS[Math.min(attempt - 1, BACKOFF_MS.length - 1)];
  return Math.round(base * (0.5 + random()));
}

export class ChatSocket {
  /**
   * @param {string} conversationId
   * @param {object} handlers
   *   afterSeq(): the last seq applied, read at each (re)connect
   *   onFrame(frame): every parsed frame
   *   onState(state, info): "connecting" | "open" | "waiting" (info.delayMs) | "closed"
   *   onRefused(code): the server closed with 4401/4404, or never accepted the handshake
   */
  constructor(conversationId, handlers) {
    this.conversationId = conversationId;
    this.handlers = handlers;
    this.ws = null;
    this.attempt = 0;
    this.failuresBeforeOpen = 0;
    this.stopped = false;
    this.retryTimer = null;
    this.pingTimer = null;
    this.lastFrameAt = 0;
    this.onOnline = () => this.retryNow();
    window.addEventListener("online", this.onOnline);
  }

  get isOpen() {
    return this.ws !== null && this.ws.readyState === WebSocket.OPEN;
  }

  url() {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const after = Math.max(0, Number(this.handlers.afterSeq()) || 0);
    return `${scheme}://${window.location.host}/ws/chat/${this.conversationId}/?after=${after}`;
  }

  connect() {
    if (this.stopped) return;
    clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.handlers.onState("connecting", { attempt: this.attempt });
    let opened = false;
    const ws = new WebSocket(this.url());
    this.ws = ws;
    ws.addEventListener("open", () => {
      if (this.ws !== ws) return;
      opened = true;
      this.failuresBeforeOpen = 0;
      this.lastFrameAt = Date.now();
      this.startPinging();
      this.handlers.onState("open", {});
    });
    ws.addEventListener("message", (message) => {
      if (this.ws !== ws) return;
      this.lastFrameAt = Date.now();
      let frame;
      try {
        frame = JSON.parse(message.data);
      } catch {
        return;
      }
      if (frame && frame.type === "sync") this.attempt = 0; // a full, healthy connect
      if (frame && frame.type !== "pong") this.handlers.onFrame(frame);
    });
    ws.addEventListener("close", (event) => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.stopPinging();
      if (this.stopped) return;
      if (event.code === CLOSE_NOT_LOGGED_IN || event.code === CLOSE_NOT_FOUND) {
        this.stopped = true;
        this.handlers.onState("closed", { code: event.code });
        this.handlers.onRefused(event.code);
        return;
      }
      if (!opened) this.failuresBeforeOpen += 1;
      // A refused handshake looks like any network failure; let the owner check over HTTP.
      if (this.failuresBeforeOpen === 2) this.handlers.onRefused(0);
      this.scheduleReconnect();
    });
  }

  scheduleReconnect() {
    if (this.stopped) return;
    const delayMs = reconnectDelayMs(this.attempt);
    this.attempt += 1;
    this.handlers.onState("waiting", { delayMs, until: Date.now() + delayMs });
    this.retryTimer = setTimeout(() => this.connect(), delayMs);
  }

  retryNow() {
    if (this.stopped || this.ws !== null) return;
    this.connect();
  }

  startPinging() {
    this.stopPinging();
    this.pingTimer = setInterval(() => {
      if (!this.isOpen) return;
      if (Date.now() - this.lastFrameAt > SILENCE_LIMIT_MS) {
        this.ws.close(4000, "silent"); // the close handler reconnects
        return;
      }
      this.send({ type: "ping" });
    }, PING_EVERY_MS);
  }

  stopPinging() {
    clearInterval(this.pingTimer);
    this.pingTimer = null;
  }

  send(frame) {
    if (!this.isOpen) return false;
    this.ws.send(JSON.stringify(frame));
    return true;
  }

  close() {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.stopPinging();
    window.removeEventListener("online", this.onOnline);
    if (this.ws) {
      const ws = this.ws;
      this.ws = null;
      ws.close(1000, "leaving");
    }
  }
}
