// The chat page's entry point: wires the sidebar, the composer, the connection indicator and
// the layout to one ConversationState, and owns navigation: which conversation is open (the
// page's ?c= address, history), starting a conversation from a draft, keeping the list fresh.
import { AgentPicker } from "./agents.js";
import { spokenAnswer } from "./answer.js";
import { api } from "./api.js";
import { Bell } from "./bell.js";
import { Composer } from "./composer.js";
import { ConversationState, State } from "./conversation-state.js";
import { ConversationView } from "./conversation.js";
import { showConnection } from "./connection.js";
import { setUpDemoBanner } from "./banner.js";
import { FilesPanel } from "./files-panel.js";
import { closeDrawer, followLatest, scrollToEnd } from "./layout.js";
import { handleCopyButtons } from "./markdown.js";
import { setUpMenu } from "./menu.js";
import { announce, confirmDialog, showNotice } from "./notices.js";
import { watchSearchBox } from "./search.js";
import { setUpShareDialog } from "./share-dialog.js";
import { Sidebar, conversationTitle } from "./sidebar.js";
import { agentName, statusMessage } from "./turn-labels.js";
import { refreshUsage } from "./usage.js";
import { ContextGauge } from "./context-gauge.js";
import { t, tf } from "./i18n.js";

const LIST_REFRESH_MS = 15000;
// Conversation ids are UUIDs; any other ?c= is not one of ours and is ignored, never requested.
const CONVERSATION_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const $ = (id) => document.getElementById(id);
const els = {
  app: $("app"),
  title: $("chat-title"),
  turns: $("turns"),
  empty: $("empty-state"),
  loading: $("loading-state"),
  newChat: $("new-chat"),
  search: $("conversation-search"),
  exportActions: $("export-actions"),
  usage: $("usage-line"),
  budgetNote: $("budget-note"),
  inspector: $("inspector-link"), // staff only
  exportJson: $("export-json"),
  exportMarkdown: $("export-markdown"),
  importFile: $("import-file"),
};
let query = ""; // the sidebar's search; "" lists every conversation

const state = new ConversationState();
const gauge = new ContextGauge($("context-gauge"));
const files = new FilesPanel({ toggle: $("files-toggle"), panel: $("files-panel"), list: $("file-list"), close: $("files-close") });
const agentPicker = new AgentPicker();
const composer = new Composer(state, { startConversation, ensureConversation, onFilesChanged: () => files.refresh(), imageless });
$("agent-select").addEventListener("change", () => composer.render());
const exportMenu = setUpMenu($("export-toggle"), $("export-menu"));
showConnection(state);
new Bell({
  onOpen: (id) => {
    if (!state.view || state.view.id !== id) openConversation(id, { push: true });
  },
});
setUpShareDialog($("share-open"), () => state.view);

// --- sidebar -------------------------------------------------------------------------------
const sidebar = new Sidebar($("conversation-list"), {
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
  onUpdate: async (id, changes) => {
    try {
      const updated = await api.organizeConversation(id, changes);
      if (changes.archived !== undefined) {
        announce(changes.archived ? tf("Archived “%s”.", [conversationTitle(updated)]) : tf("“%s” is back in the list.", [conversationTitle(updated)]));
      }
      return updated;
    } catch (error) {
      showNotice(tf("Could not change the conversation: %s", [error.message]));
      return null;
    }
  },
  onView: () => refreshList(),
  loadPage: (before) => api.conversationPage(before, undefined, query, sidebar.archived),
});

async function refreshList() {
  try {
    const asked = query;
    const archived = sidebar.archived;
    const page = await api.conversationPage(null, undefined, asked, archived);
    // The search or the view changed meanwhile: its own fetch fills the list.
    if (asked !== query || archived !== sidebar.archived) return;
    sidebar.setFirstPage(page);
    if (state.view) {
      sidebar.setActive(state.view.id);
      if (state.facts && state.facts.loaded) sidebar.setRunning(state.view.id, state.facts.running);
      const current = sidebar.get(state.view.id);
      if (current) els.title.textContent = conversationTitle(current);
    }
  } catch {
    // the next refresh tries again
  }
}

// The open conversation's facts, as far as the page around it shows them.
state.addEventListener("change", () => {
  if (!state.facts || !state.facts.loaded) return;
  els.loading.hidden = true;
  // A conversation with no message yet (opened by its address, say) invites one like a draft.
  els.empty.hidden = !(state.facts.turns === 0 && state.name === State.IDLE);
  sidebar.setRunning(state.view.id, state.facts.running);
});

// --- opening conversations -----------------------------------------------------------------
function conversationIdFromUrl() {
  const id = new URLSearchParams(window.location.search).get("c");
  return id && CONVERSATION_ID.test(id) ? id.toLowerCase() : null;
}

function setUrl(id, push) {
  const url = id ? `/?c=${encodeURIComponent(id)}` : "/";
  if (window.location.pathname + window.location.search === url) return;
  if (push) window.history.pushState({ id }, "", url);
  else window.history.replaceState({ id }, "", url);
}

function clearTurns() {
  els.turns.replaceChildren();
  delete els.turns.dataset.historyMs;
  delete els.turns.dataset.historyFetchMs;
  delete els.turns.dataset.historyEvents;
}

function startDraft({ push }) {
  state.toDraft();
  clearTurns();
  sidebar.setActive(null);
  setUrl(null, push);
  els.title.textContent = t("New conversation");
  document.title = `${t("New conversation")} · agentsite`;
  els.empty.hidden = false;
  els.loading.hidden = true;
  els.app.dataset.conversation = "";
  els.exportActions.hidden = true;
  exportMenu.close();
  agentPicker.toDraft();
  gauge.show(null);
  files.show(null);
  if (els.inspector) els.inspector.href = "/inspect/";
  composer.focus();
}

/** Opens a conversation; a new one's `firstMessage` is sent as soon as its socket is live. */
function openConversation(id, { push, firstMessage = null }) {
  const view = new ConversationView(id, els.turns, {
    onState: (facts) => {
      if (state.view !== view) return;
      state.observe(facts);
      gauge.show(facts.context);
    },
    onNotice: (frame) => {
      if (state.view !== view) return;
      composer.refused(frame);
      if (frame.code === "AGENT_UNAVAILABLE") agentPicker.load(); // the list has changed: show what is left
    },
    onGone: () => {
      if (state.view !== view) return;
      sidebar.remove(id);
      showNotice(t("This conversation no longer exists."));
      startDraft({ push: false });
    },
    onRunFinished: () => {
      if (state.view !== view) return;
      // Said once, politely: how the run ended, then its answer (never the answer's every delta).
      const last = view.order[view.order.length - 1];
      const ending = (last && statusMessage(last.status)) || t("The answer is complete.");
      announce(last && last.status !== "cancelled" ? [ending, spokenAnswer(last)].join(" ").trim() : ending);
      refreshList();
      refreshUsage(els.usage, els.budgetNote);
      files.refresh(); // the agent may have written some
    },
    onScroll: (force) => scrollToEnd(force),
    // A title generated after the first answer (a `title` frame): in the list and the header at once.
    onTitle: (title) => {
      if (state.view !== view) return;
      sidebar.setTitle(id, title);
      const current = sidebar.get(id);
      if (current && current.titleSource === "user") return;
      els.title.textContent = title;
      document.title = `${title} · agentsite`;
    },
    // An edit or regenerate from a turn's buttons: sent when a message could be sent now.
    onVersionFrame: (frame, text) => {
      if (state.view !== view) return false;
      if (state.name !== State.IDLE || composer.blockReason()) {
        showNotice(composer.blockReason() || t("Wait for the current answer."));
        return false;
      }
      return state.sendVersion(frame, text);
    },
    onContinue: () => {
      if (state.view !== view) return false;
      if (state.name !== State.IDLE || composer.blockReason()) {
        showNotice(composer.blockReason() || t("Wait for the current answer."));
        return false;
      }
      return state.send(t("Continue"));
    },
  });
  state.open(view, firstMessage);
  clearTurns();
  sidebar.setActive(id);
  setUrl(id, push);
  const conversation = sidebar.get(id);
  els.title.textContent = conversationTitle(conversation);
  document.title = `${conversationTitle(conversation)} · agentsite`;
  agentPicker.show(id, conversation && conversation.agent);
  els.empty.hidden = true;
  els.loading.hidden = false;
  els.app.dataset.conversation = id;
  els.exportJson.href = api.exportUrl(id, "json");
  els.exportMarkdown.href = api.exportUrl(id, "markdown");
  els.exportActions.hidden = false;
  files.show(id);
  if (els.inspector) els.inspector.href = `/inspect/?conversation=${id}`; // this conversation's runs
  followLatest();
  view.open();
  if (!conversation) {
    refreshList(); // opened by address: not in the list fetched so far
    // nor, when older than the pages loaded, in the refreshed one: its title comes on its own
    api.getConversation(id).then((found) => {
      if (state.view !== view) return;
      agentPicker.show(id, found.agent);
      if (sidebar.get(id)) return;
      els.title.textContent = conversationTitle(found);
      document.title = `${conversationTitle(found)} · agentsite`;
    }).catch(() => {}); // a missing conversation is reported by its socket
  }
}

// What the server titles an untitled conversation after its first message, until a title is
// generated (docs/protocol.md, "Titles, pinning, archiving"): shown in the list meanwhile, never sent as a title.
const FIRST_MESSAGE_TITLE_CHARS = 60;

/** A new conversation, with the agent chosen in the draft whichever path creates it; untitled,
 * so that the server names it after its first message and then a generated title. */
async function createConversation() {
  state.create();
  agentPicker.creating(true);
  try {
    return await api.createConversation("", agentPicker.forNewConversation);
  } catch (error) {
    state.createFailed();
    agentPicker.creating(false);
    throw error;
  }
}

/** A draft's first message: the conversation is created with it, then the message is sent. */
async function startConversation(content) {
  let conversation;
  try {
    conversation = await createConversation();
  } catch (error) {
    composer.giveBack(content);
    showNotice(tf("Could not start the conversation: %s", [error.message]));
    return;
  }
  const title = content.split(/\s+/).join(" ").trim().slice(0, FIRST_MESSAGE_TITLE_CHARS).trim();
  sidebar.upsert({ running: false, ...conversation, title });
  openConversation(conversation.id, { push: true, firstMessage: content });
}

/** The open conversation's id; a draft's conversation is created and opened, so that files can
 * be uploaded into it before anything is sent. Not titled after the files: its first message
 * names it, as any other. */
async function ensureConversation() {
  if (state.view) return state.view.id;
  if (state.name !== State.DRAFT) throw new Error(t("Wait a moment and try again."));
  const conversation = await createConversation();
  sidebar.upsert({ running: false, ...conversation });
  openConversation(conversation.id, { push: true });
  return conversation.id;
}

/** The chosen agent's name when its model is not shown attached images ("" when it is, or unknown). */
function imageless() {
  const chosen = agentPicker.select.value || "default"; // the draft's choice, or the open conversation's
  const agent = agentPicker.agents.find((each) => each.slug === chosen);
  return agent && agent.vision === false ? agentName(agent.slug, agent.name) : "";
}

// --- search, import ------------------------------------------------------------------------
watchSearchBox(els.search, (text) => {
  query = text;
  sidebar.setQuery(text);
  refreshList();
});

els.importFile.addEventListener("change", async () => {
  const file = els.importFile.files[0];
  els.importFile.value = "";
  if (!file) return;
  try {
    const answer = await api.importConversation(await file.text());
    // An export of all conversations makes as many; the first of them opens.
    const imported = answer.conversations || [answer];
    for (const conversation of imported) sidebar.upsert({ running: false, ...conversation });
    closeDrawer();
    openConversation(imported[0].id, { push: true });
    const notice =
      imported.length === 1
        ? tf("Imported “%s”.", [conversationTitle(imported[0])])
        : tf("Imported %s conversations.", [String(imported.length)]);
    showNotice(notice, { kind: "info" });
  } catch (error) {
    showNotice(tf("Could not import: %s", [error.message]));
  }
});

// --- start ---------------------------------------------------------------------------------
handleCopyButtons(els.turns);
setUpDemoBanner();
els.newChat.addEventListener("click", () => {
  closeDrawer();
  startDraft({ push: true });
});
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
  await Promise.all([refreshList(), agentPicker.load()]);
  refreshUsage(els.usage, els.budgetNote);
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
