// The header's bell (docs/protocol.md, "Notifications"): the unread count fed by
// /ws/notifications/, the list under it (GET /api/notifications/), a click that opens the
// conversation and marks it read, "Mark all read"; and, once the user allowed it (asked only
// from their click on "Show browser notifications"), a browser notification for each new one
// while the page is hidden. The socket is not replayed: a (re)connect reads the list again.

import { api } from "./api.js";
import { t, tf } from "./i18n.js";
import { CLOSE_NOT_LOGGED_IN, reconnectDelayMs } from "./socket.js";

const PING_EVERY_MS = 20000;
const LIST_LIMIT = 20;

/** What a notification says under its title. */
export function notificationText(n) {
  if (n.kind === "approval_waiting") return tf("Waiting for your approval to run %s", [n.toolName || ""]);
  if (n.kind === "schedule_failed") return tf("The schedule could not run: %s", [n.code || ""]);
  if (n.status && n.status !== "succeeded") return tf("The run ended: %s", [n.status]);
  return n.body || t("The answer is ready.");
}

export class Bell {
  /** `onOpen(conversationId)` opens a conversation of the page. */
  constructor({ onOpen }) {
    this.onOpen = onOpen;
    this.toggle = document.getElementById("bell-toggle");
    this.panel = document.getElementById("bell-panel");
    this.list = document.getElementById("bell-list");
    this.empty = document.getElementById("bell-empty");
    this.badge = document.getElementById("bell-count");
    this.permission = document.getElementById("bell-permission");
    this.items = [];
    this.count = 0;
    this.attempt = 0;
    this.ws = null;
    this.toggle.addEventListener("click", () => (this.panel.hidden ? this.open() : this.close(false)));
    document.getElementById("bell-read-all").addEventListener("click", () => this.markRead({ all: true }));
    this.permission.addEventListener("click", () => this.askPermission());
    document.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && !this.panel.hidden) this.close(true);
    });
    document.addEventListener("click", (event) => {
      if (!this.panel.hidden && !this.toggle.contains(event.target) && !this.panel.contains(event.target)) this.close(false);
    });
    this.showPermission();
    this.connect();
  }

  setCount(count) {
    this.count = Math.max(0, count);
    this.badge.textContent = this.count > 99 ? "99+" : String(this.count);
    this.badge.hidden = this.count === 0;
    const label = this.count ? tf("Notifications, %s unread", [String(this.count)]) : t("Notifications");
    this.toggle.setAttribute("aria-label", label);
  }

  async open() {
    this.panel.hidden = false;
    this.toggle.setAttribute("aria-expanded", "true");
    await this.load();
  }

  close(refocus) {
    this.panel.hidden = true;
    this.toggle.setAttribute("aria-expanded", "false");
    if (refocus) this.toggle.focus();
  }

  async load() {
    try {
      const page = await api.notifications(LIST_LIMIT);
      this.items = page.notifications;
      this.setCount(page.unread);
      this.render();
    } catch {
      // the list stays as it was; the next open reads it again
    }
  }

  render() {
    this.list.replaceChildren(...this.items.map((n) => this.row(n)));
    this.empty.hidden = this.items.length > 0;
  }

  row(n) {
    const li = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.className = "menu-item bell-item";
    button.dataset.read = String(n.read);
    button.dataset.id = String(n.id);
    const title = document.createElement("strong");
    title.textContent = n.title;
    const note = document.createElement("span");
    note.className = "menu-note";
    note.textContent = notificationText(n);
    button.append(title, note);
    button.addEventListener("click", () => this.choose(n));
    li.append(button);
    return li;
  }

  async choose(n) {
    this.close(false);
    if (!n.read) await this.markRead({ ids: [n.id] });
    if (n.conversationId) this.onOpen(n.conversationId);
  }

  async markRead(body) {
    try {
      const answer = await api.readNotifications(body);
      for (const n of this.items) if (body.all || body.ids.includes(n.id)) n.read = true;
      this.setCount(answer.unread);
      this.render();
    } catch {
      // nothing marked: the count stays
    }
  }

  showPermission() {
    this.permission.hidden = !("Notification" in window) || Notification.permission !== "default";
  }

  async askPermission() {
    // Asked from the user's click only, as browsers require.
    try {
      await Notification.requestPermission();
    } finally {
      this.showPermission();
    }
  }

  received(n) {
    this.items = [n, ...this.items.filter((m) => m.id !== n.id)].slice(0, LIST_LIMIT);
    if (!n.read) this.setCount(this.count + 1);
    if (!this.panel.hidden) this.render();
    if (document.hidden && "Notification" in window && Notification.permission === "granted") {
      const shown = new Notification(n.title || t("Notifications"), { body: notificationText(n), tag: `agentsite-${n.id}` });
      shown.addEventListener("click", () => {
        window.focus();
        this.choose(n);
      });
    }
  }

  connect() {
    const scheme = window.location.protocol === "https:" ? "wss" : "ws";
    const ws = new WebSocket(`${scheme}://${window.location.host}/ws/notifications/`);
    this.ws = ws;
    let ping = null;
    ws.addEventListener("open", () => {
      this.attempt = 0;
      ping = setInterval(() => ws.send(JSON.stringify({ type: "ping" })), PING_EVERY_MS);
    });
    ws.addEventListener("message", (event) => {
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        return;
      }
      if (frame.type === "unread") {
        this.setCount(frame.count);
        if (!this.panel.hidden) this.load();
      } else if (frame.type === "notification") {
        const { type, ...n } = frame;
        this.received(n);
      }
    });
    ws.addEventListener("close", (event) => {
      clearInterval(ping);
      if (event.code === CLOSE_NOT_LOGGED_IN) return; // signed out: the page's own socket says so
      setTimeout(() => this.connect(), reconnectDelayMs(this.attempt++));
    });
  }
}
