// The agent picker in the composer (docs/protocol.md, "Agents"): the agents this user may pick, from
// /api/agents/. A draft's choice (`forNewConversation`, the one place that says it) goes with the
// conversation it starts, whichever creates it: its first message or a file attached first. In an
// open conversation a change is saved at once (PATCH) and applies from the next message on, each
// answer naming the agent that wrote it; changes made quickly are saved one after the other, the
// last one winning. With a single agent to pick there is nothing to choose and it stays hidden.
import { api } from "./api.js";
import { h } from "./dom.js";
import { showNotice } from "./notices.js";
import { tf } from "./i18n.js";
import { agentName } from "./turn-labels.js";

const DEFAULT = "default";

export class AgentPicker {
  constructor() {
    this.wrap = document.getElementById("agent-pick");
    this.select = document.getElementById("agent-select");
    this.agents = [];
    this.labels = new Map(); // slug -> "Name · model" of every agent listed so far, for one since taken away
    this.conversationId = null; // null: a draft
    this.draftChoice = DEFAULT;
    this.wanted = null; // the open conversation's agent last chosen, until it is saved
    this.saving = Promise.resolve(); // the saves, one after the other
    this.select.addEventListener("change", () => this.changed());
  }

  /** The slug a new conversation starts with: what the user chose in the draft. */
  get forNewConversation() {
    return this.draftChoice;
  }

  /** While a draft's conversation is being created: its agent is decided, the choice waits. */
  creating(busy) {
    this.select.disabled = busy;
  }

  async load() {
    try {
      this.agents = (await api.agents()).agents || [];
    } catch {
      this.agents = []; // the default agent answers; the picker stays hidden
    }
    this.render(this.conversationId ? this.wanted || this.select.value || DEFAULT : this.draftChoice);
  }

  render(current) {
    for (const agent of this.agents) this.labels.set(agent.slug, `${agentName(agent.slug, agent.name)} · ${agent.model}`);
    const options = this.agents.map((agent) =>
      h("option", { value: agent.slug, title: [agent.description, agent.model].filter(Boolean).join(" · "), text: this.labels.get(agent.slug) }));
    // A conversation's agent the user may no longer use is shown as such (sending is refused with a reason).
    if (current && !this.agents.some((agent) => agent.slug === current)) {
      options.push(h("option", { value: current, disabled: true, text: tf("%s (unavailable)", [this.labels.get(current) || current]) }));
    }
    this.select.replaceChildren(...options);
    this.select.value = current || DEFAULT;
    this.wrap.hidden = options.length < 2;
  }

  toDraft() {
    this.conversationId = null;
    this.wanted = null;
    this.creating(false);
    this.render(this.draftChoice);
  }

  /** An opened conversation: `agent` is its slug (from the list or GET), when known. */
  show(conversationId, agent) {
    if (conversationId !== this.conversationId) this.wanted = null;
    this.conversationId = conversationId;
    this.creating(false);
    this.render(this.wanted || agent || DEFAULT);
  }

  changed() {
    const chosen = this.select.value;
    if (!this.conversationId) {
      this.draftChoice = chosen;
      return this.saving;
    }
    const id = this.conversationId;
    this.wanted = chosen;
    // Saved in turn, a choice replaced before its turn skipped: answers that came back out of
    // order could otherwise leave the server on one agent and the picker showing another.
    this.saving = this.saving.then(async () => {
      if (this.conversationId !== id || this.wanted !== chosen) return;
      try {
        const updated = await api.setAgent(id, chosen);
        if (this.conversationId === id && this.wanted === chosen) {
          this.wanted = null;
          this.render(updated.agent);
        }
      } catch (error) {
        if (this.wanted === chosen) this.wanted = null;
        showNotice(tf("Could not change the agent: %s", [error.message]));
        if (this.conversationId === id) this.load();
      }
    });
    return this.saving;
  }
}
