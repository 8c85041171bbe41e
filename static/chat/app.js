// The chat page: sidebar, conversation, composer, connection state.
import { api } from "./api.js";
import { ConversationView } from "./conversation.js";
import { copyText } from "./markdown.js";
import { Sidebar, conversationTitle } from "./sidebar.js";
import { onAfterRender } from "./timeline.js";
import { t, tf } from "./i18n.js";

const LIST_REFRESH_MS = 15000;
const STICK_DISTANCE_PX = 80;

const $ = (id) => document.getElementById(id);
const els = {
  app: $("app"),
  list: $("conversation-list"),
  newChat: $("new-chat"),
  title: $("chat-title"),
  scroller: $("messages-scroll"),
  turns: $("turns"),
  empty: $("empty-state"),
  loading: $("loading-state"),
  connection: $("connection-status"),
  connectionText: $("connection-text"),
  retryNow: $("retry-now"),
  composer: $("composer"),
  input: $("message-input"),
  send: $("send-button"),
  stop: $("stop-button"),
  reason: $("composer-reason"),
  notice: $("notice"),
  noticeText: $("notice-text"),
  noticeClose: $("notice-close"),
  jump: $("jump-latest"),
  srStatus: $("sr-status"),
  dialog: $("confirm-dialog"),
  dialogText: $("confirm-text"),
  sidebarToggle: $("sidebar-toggle"),
  sidebarClose: $("sidebar-close"),
  backdrop: $("sidebar-backdrop"),
};

const state = {
  view: null,
  viewState: null,
  awaitingEcho: false,
  sentTurns: 0,
  echoTimer: null,
  lastSent: "",
  outbox: null, // a first message waiting for its new conversation's socket
  stopping: false,
  stick: true,
  countdownTimer: null,
};

// --- sidebar -------------------------------------------------------------------------------
const sidebar = new Sidebar(els.list, {
  onSelect: (id) => {
    closeDrawer();
    if (!state.view || state.view.id !== id) openConversation(id, { push: true });
  },
  onRename: async (id, title) => {
    const updated = await api.renameConversation(id, title);
    if (state.view && state.view.id === id) els.title.textContent = conversationTitle(updated);
    return updated;
  },
  onDelete: async (id) => {
    const conversation = sidebar.get(id);
    const ok = await confirmDialog(tf("Delete “%s”? Its messages cannot be recovered.", [conversationTitle(conversation)]));
    if (!ok) return;
    try {
      await api.deleteConversation(id);
    } catch (error) {
      showNotice(tf("Could not delete: %s", [error.message]));
      return;
    }
    sidebar.remove(id);
    if (state.view && state.view.id === id) startDraft({ push: true });
  },
});

async function refreshList() {
  try {
    const conversations = await api.listConversations();
    sidebar.setConversations(conversations);
    if (state.view) {
      sidebar.setActive(state.view.id);
      if (state.viewState && state.viewState.loaded) sidebar.setRunning(state.view.id, state.viewState.running);
      const current = sidebar.get(state.view.id);
      if (current) els.title.textContent = conversationTitle(current);
    }
  } catch {
    // the next refresh tries again
  }
}

// --- opening conversations -----------------------------------------------------------------
function closeView() {
  if (state.view) state.view.close();
  state.view = null;
  state.viewState = null;
  state.awaitingEcho = false;
  state.stopping = false;
  clearTimeout(state.echoTimer);
  els.turns.replaceChildren();
  delete els.turns.dataset.historyMs;
  delete els.turns.dataset.historyFetchMs;
  delete els.turns.dataset.historyEvents;
}

function setUrl(id, push) {
  const url = id ? `/?c=${encodeURIComponent(id)}` : "/";
  if (window.location.pathname + window.location.search === url) return;
  if (push) window.history.pushState({ id }, "", url);
  else window.history.replaceState({ id }, "", url);
}

function startDraft({ push }) {
  closeView();
  state.outbox = null;
  sidebar.setActive(null);
  setUrl(null, push);
  els.title.textContent = t("New conversation");
  document.title = `${t("New conversation")} · agentsite`;
  els.empty.hidden = false;
  els.loading.hidden = true;
  els.app.dataset.conversation = "";
  updateConnection();
  updateComposer();
  els.input.focus();
}

function openConversation(id, { push }) {
  closeView();
  sidebar.setActive(id);
  setUrl(id, push);
  const conversation = sidebar.get(id);
  els.title.textContent = conversationTitle(conversation);
  document.title = `${conversationTitle(conversation)} · agentsite`;
  els.empty.hidden = true;
  els.loading.hidden = false;
  els.app.dataset.conversation = id;
  state.stick = true;
  const view = new ConversationView(id, els.turns, {
    onState: (viewState) => {
      if (state.view !== view) return;
      onViewState(viewState);
    },
    onNotice: (frame) => {
      if (state.view !== view) return;
      onErrorFrame(frame);
    },
    onGone: () => {
      if (state.view !== view) return;
      sidebar.remove(id);
      showNotice(t("This conversation no longer exists."));
      startDraft({ push: false });
    },
    onRunFinished: () => {
      if (state.view !== view) return;
      const last = view.order[view.order.length - 1];
      announce(last && last.status === "cancelled" ? t("Stopped.") : t("The answer is complete."));
      refreshList();
    },
    onScroll: (force) => scrollToEnd(force),
  });
  state.view = view;
  updateConnection();
  updateComposer();
  view.open();
  if (!conversation) refreshList(); // opened by address: not in the list fetched so far
}

function onViewState(viewState) {
  const previous = state.viewState;
  state.viewState = viewState;
  if (viewState.loaded) els.loading.hidden = true;
  // The echo of what we sent: a run that started (or even finished, when the frames came in one batch).
  if (viewState.running || (state.awaitingEcho && viewState.turns > state.sentTurns)) {
    state.awaitingEcho = false;
    clearTimeout(state.echoTimer);
  }
  if (!viewState.running) state.stopping = false;
  if (viewState.loaded) sidebar.setRunning(state.view.id, viewState.running);
  // A first message queued while the new conversation's socket was connecting.
  if (state.outbox && viewState.connection === "open" && viewState.synced && !viewState.running) {
    const content = state.outbox;
    state.outbox = null;
    sendNow(content);
  }
  updateConnection();
  updateComposer();
  if (previous && previous.running && !viewState.running && document.activeElement === document.body) els.input.focus();
}

// --- composer ------------------------------------------------------------------------------
function composerBlock() {
  const viewState = state.viewState;
  if (state.view) {
    if (!viewState || !viewState.loaded) return t("Loading the conversation…");
    if (viewState.running) return state.stopping ? t("Stopping…") : t("The agent is working on an answer. Wait for it, or press Stop.");
    if (state.awaitingEcho || state.outbox) return t("Sending…");
    if (viewState.connection !== "open" || !viewState.synced) return t("Not connected. Your message can be sent when the connection is back.");
  }
  return "";
}

function updateComposer() {
  const block = composerBlock();
  const running = Boolean(state.viewState && state.viewState.running);
  els.reason.textContent = block;
  els.reason.hidden = !block;
  els.composer.dataset.blocked = String(Boolean(block));
  const lockInput = running || state.awaitingEcho || Boolean(state.outbox);
  els.input.disabled = lockInput;
  els.input.setAttribute("aria-describedby", block ? "composer-reason composer-hint" : "composer-hint");
  els.send.disabled = Boolean(block) || els.input.value.trim() === "";
  els.stop.hidden = !running;
  els.stop.disabled = state.stopping || !(state.viewState && state.viewState.connection === "open");
  els.send.hidden = running;
}

function autosize() {
  els.input.style.height = "auto";
  els.input.style.height = `${Math.min(els.input.scrollHeight, 240)}px`;
}

function sendNow(content) {
  if (!state.view.send(content)) {
    showNotice(t("Not connected. Your message was not sent."));
    if (!els.input.value) els.input.value = content;
    return;
  }
  state.lastSent = content;
  state.sentTurns = state.viewState ? state.viewState.turns : 0;
  state.awaitingEcho = true;
  clearTimeout(state.echoTimer);
  // No echo in time: let the user try again rather than wait forever.
  state.echoTimer = setTimeout(() => {
    state.awaitingEcho = false;
    updateComposer();
  }, 15000);
  updateComposer();
}

async function submit() {
  const content = els.input.value.trim();
  if (!content || composerBlock()) return;
  els.input.value = "";
  autosize();
  if (state.view) {
    sendNow(content);
    return;
  }
  // A draft: the conversation is created with the first message, then the message is sent.
  const title = content.split("\n")[0].slice(0, 80);
  state.outbox = content;
  updateComposer();
  try {
    const conversation = await api.createConversation(title);
    sidebar.upsert({ running: false, ...conversation, title: conversation.title || title });
    const outbox = state.outbox;
    openConversation(conversation.id, { push: true });
    state.outbox = outbox;
    updateComposer();
  } catch (error) {
    state.outbox = null;
    els.input.value = content;
    autosize();
    updateComposer();
    showNotice(tf("Could not start the conversation: %s", [error.message]));
  }
}

function onErrorFrame(frame) {
  state.awaitingEcho = false;
  clearTimeout(state.echoTimer);
  if (state.lastSent && !els.input.value) {
    els.input.value = state.lastSent; // give the unsent message back
    autosize();
  }
  const messages = {
    RUN_IN_PROGRESS: t("The agent is still working on the previous message."),
    TOO_LARGE: t("The message is too long."),
    RATE_LIMITED: t("Too many messages. Please wait a moment."),
    BAD_REQUEST: t("The server did not accept that message."),
  };
  showNotice(messages[frame.code] || frame.message || t("Something went wrong."));
  updateComposer();
}

els.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  submit();
});
els.input.addEventListener("keydown", (event) => {
  // isComposing: Enter that confirms an IME candidate (Chinese input) must not send.
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing && event.keyCode !== 229) {
    event.preventDefault();
    submit();
  }
});
els.input.addEventListener("input", () => {
  autosize();
  updateComposer();
});
els.stop.addEventListener("click", () => {
  if (!state.view) return;
  if (state.view.cancel()) {
    state.stopping = true;
    updateComposer();
  }
});

// --- connection state ----------------------------------------------------------------------
function updateConnection() {
  clearInterval(state.countdownTimer);
  const viewState = state.viewState;
  let mode = "idle";
  let text = "";
  if (state.view && viewState) {
    if (viewState.connection === "open" && viewState.synced) mode = "live";
    else if (viewState.connection === "waiting") mode = "waiting";
    else if (viewState.connection === "closed") mode = "offline";
    else mode = "connecting";
  }
  const render = () => {
    if (mode === "live") text = t("Live");
    else if (mode === "connecting") text = t("Connecting…");
    else if (mode === "offline") text = t("Disconnected");
    else if (mode === "waiting") {
      const seconds = Math.max(0, Math.ceil((viewState.retryAt - Date.now()) / 1000));
      text = seconds > 0 ? tf("Connection lost. Reconnecting in %s s…", [seconds]) : t("Reconnecting…");
    }
    els.connectionText.textContent = text;
  };
  render();
  if (mode === "waiting") state.countdownTimer = setInterval(render, 500);
  els.connection.dataset.mode = mode;
  els.connection.hidden = mode === "idle";
  els.retryNow.hidden = mode !== "waiting";
  els.app.dataset.connection = mode;
}
els.retryNow.addEventListener("click", () => state.view && state.view.reconnectNow());

// --- notices, announcements, dialog --------------------------------------------------------
let noticeTimer = null;
function showNotice(text) {
  els.noticeText.textContent = text;
  els.notice.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => {
    els.notice.hidden = true;
  }, 8000);
}
els.noticeClose.addEventListener("click", () => {
  els.notice.hidden = true;
});

function announce(text) {
  els.srStatus.textContent = "";
  requestAnimationFrame(() => {
    els.srStatus.textContent = text;
  });
}

function confirmDialog(text) {
  els.dialogText.textContent = text;
  return new Promise((resolve) => {
    const onClose = () => {
      els.dialog.removeEventListener("close", onClose);
      resolve(els.dialog.returnValue === "confirm");
    };
    els.dialog.returnValue = "";
    els.dialog.addEventListener("close", onClose);
    els.dialog.showModal();
    els.dialog.querySelector("[value=cancel]").focus();
  });
}

// --- scrolling -----------------------------------------------------------------------------
function nearBottom() {
  const s = els.scroller;
  return s.scrollHeight - s.scrollTop - s.clientHeight < STICK_DISTANCE_PX;
}
function scrollToEnd(force) {
  if (force) state.stick = true;
  if (state.stick) els.scroller.scrollTop = els.scroller.scrollHeight;
  els.jump.hidden = state.stick;
}
els.scroller.addEventListener("scroll", () => {
  state.stick = nearBottom();
  els.jump.hidden = state.stick;
}, { passive: true });
els.jump.addEventListener("click", () => {
  scrollToEnd(true);
  els.input.focus();
});
onAfterRender(() => scrollToEnd(false));
// Turns change height after they are drawn (Markdown, off-screen turns rendered late):
// a reader at the bottom stays at the bottom.
new ResizeObserver(() => {
  if (state.stick) els.scroller.scrollTop = els.scroller.scrollHeight;
}).observe(els.turns);

// --- copy buttons (delegated: answers are re-rendered while they stream) ----------------
els.turns.addEventListener("click", async (event) => {
  const button = event.target.closest("[data-action=copy-code]");
  if (!button) return;
  const code = button.closest(".code-block")?.querySelector("pre code");
  if (!code) return;
  const ok = await copyText(code.textContent);
  button.textContent = ok ? t("Copied") : t("Copy failed");
  button.classList.toggle("copied", ok);
  setTimeout(() => {
    if (button.isConnected) {
      button.textContent = t("Copy");
      button.classList.remove("copied");
    }
  }, 1500);
});

// --- phone-width drawer --------------------------------------------------------------------
function openDrawer() {
  document.body.classList.add("drawer-open");
  els.sidebarToggle.setAttribute("aria-expanded", "true");
  els.backdrop.hidden = false;
  els.newChat.focus();
}
function closeDrawer() {
  if (!document.body.classList.contains("drawer-open")) return;
  document.body.classList.remove("drawer-open");
  els.sidebarToggle.setAttribute("aria-expanded", "false");
  els.backdrop.hidden = true;
}
els.sidebarToggle.addEventListener("click", openDrawer);
els.sidebarClose.addEventListener("click", () => {
  closeDrawer();
  els.sidebarToggle.focus();
});
els.backdrop.addEventListener("click", closeDrawer);
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && document.body.classList.contains("drawer-open")) {
    closeDrawer();
    els.sidebarToggle.focus();
  }
});

// --- start ---------------------------------------------------------------------------------
els.newChat.addEventListener("click", () => {
  closeDrawer();
  startDraft({ push: true });
});
for (const button of document.querySelectorAll("[data-suggestion]")) {
  button.addEventListener("click", () => {
    els.input.value = button.dataset.suggestion;
    autosize();
    updateComposer();
    els.input.focus();
  });
}
// The conversation named by ?c=, if it is a UUID: the id goes into API and socket URLs, so
// anything else (`../`, `?`, `#`) could point them elsewhere on the site. Invalid: ignored.
const UUID_PATTERN = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
function conversationIdFromUrl() {
  const id = new URLSearchParams(window.location.search).get("c");
  return id && UUID_PATTERN.test(id) ? id.toLowerCase() : null;
}

window.addEventListener("popstate", () => {
  const id = conversationIdFromUrl();
  if (id && (!state.view || state.view.id !== id)) openConversation(id, { push: false });
  else if (!id && state.view) startDraft({ push: false });
});
document.addEventListener("visibilitychange", () => {
  if (!document.hidden) {
    refreshList();
    if (state.view) state.view.reconnectNow();
  }
});

async function start() {
  await refreshList();
  const id = conversationIdFromUrl();
  if (id) openConversation(id, { push: false });
  else startDraft({ push: false });
  setInterval(() => {
    if (!document.hidden) refreshList();
  }, LIST_REFRESH_MS);
}

// For tests and curious readers: the open conversation's view.
window.agentsite = { get view() { return state.view; } };
start();
