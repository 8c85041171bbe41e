// The list of the user's conversations: newest first under date headings (date-groups.js), a
// mark on running ones, rename in place, delete after confirmation, switch without reloading.
// The server sends it in pages (docs/protocol.md, "Conversations"); older pages load as the list is
// scrolled to its end. While a search is on, the list holds its hits instead, best first
// (the server ranks them, so no date headings), each with its snippet, the words marked.
import { dateGroup } from "./date-groups.js";
import { h } from "./dom.js";
import { icon } from "./icons.js";
import { t, tf } from "./i18n.js";
import { highlighted, queryTerms } from "./search.js";

export function conversationTitle(conversation) {
  return (conversation && conversation.title && conversation.title.trim()) || t("New conversation");
}

// The list's order, as the server's: updated_at, then id, both descending. Django writes
// microseconds only when they are not zero, so the fraction is padded before comparing text.
function orderKey(conversation) {
  const stamp = String(conversation.updated_at || "").replace(/^([^.+Z]{19})(?:\.(\d+))?/, (_, whole, fraction) => `${whole}.${(fraction || "").padEnd(6, "0")}`);
  return `${stamp}|${conversation.id}`;
}

export class Sidebar {
  /**
   * @param {HTMLElement} list  the <ul>
   * @param {object} hooks  onSelect(id), onRename(id, title) -> Promise, onDelete(id) -> Promise,
   *   loadPage(before) -> Promise<{conversations, next}>
   */
  constructor(list, hooks) {
    this.list = list;
    this.hooks = hooks;
    this.conversations = [];
    this.activeId = null;
    this.runningOverride = new Map();
    this.editingId = null;
    this.signature = null;
    this.next = null; // the cursor of the page after the ones shown; null: nothing older
    this.extended = false; // pages past the first are shown
    this.loading = false;
    this.terms = []; // the words of the search shown; none: the whole list
    list.addEventListener("click", (event) => this.onClick(event));
    // Scrolling near the end of the list loads the next page.
    this.sentinel = h("div", { className: "conv-more", "aria-hidden": "true", dataset: { state: "end" } });
    list.parentElement.append(this.sentinel);
    this.observer = new IntersectionObserver((entries) => {
      if (entries.some((entry) => entry.isIntersecting)) this.loadMore();
    }, { root: list.closest(".conv-nav"), rootMargin: "0px 0px 240px 0px" });
    this.observer.observe(this.sentinel);
  }

  /** The newest page, fetched again every few seconds: it replaces the top of the list and keeps
   * the older pages already loaded (those older than its last row). */
  setFirstPage(page) {
    const first = (page && page.conversations) || [];
    if (!this.extended || !page.next || !first.length) {
      this.conversations = first.slice();
      this.next = (page && page.next) || null;
      this.extended = false;
    } else {
      const ids = new Set(first.map((c) => c.id));
      const boundary = orderKey(first[first.length - 1]);
      // Search hits are ranked, not in date order: the ones loaded below the first page stay.
      const older = this.conversations.filter((c) => !ids.has(c.id) && (this.terms.length > 0 || orderKey(c) < boundary));
      this.conversations = first.concat(older); // this.next still follows the last older page
    }
    this.render();
    this.watchEnd();
  }

  /** A new search (or none, ""): the next first page replaces the whole list. */
  setQuery(query) {
    this.terms = queryTerms(query);
    this.list.dataset.searching = String(Boolean(query));
    this.extended = false;
    this.next = null;
    this.signature = null;
  }

  async loadMore() {
    if (this.loading || !this.next) return;
    this.loading = true;
    this.sentinel.dataset.state = "loading";
    this.list.setAttribute("aria-busy", "true");
    try {
      const page = await this.hooks.loadPage(this.next);
      const known = new Set(this.conversations.map((c) => c.id));
      this.conversations = this.conversations.concat((page.conversations || []).filter((c) => !known.has(c.id)));
      this.next = page.next || null;
      this.extended = true;
      this.render();
    } catch {
      // tried again when the end of the list comes into view again, or at the next refresh
    } finally {
      this.loading = false;
      this.list.removeAttribute("aria-busy");
      this.watchEnd();
    }
  }

  /** Observing again reports at once whether the end is still in view (a short page). */
  watchEnd() {
    this.sentinel.dataset.state = this.next ? "more" : "end";
    if (!this.next || this.loading) return;
    this.observer.unobserve(this.sentinel);
    this.observer.observe(this.sentinel);
  }

  get(id) {
    return this.conversations.find((c) => c.id === id) || null;
  }

  upsert(conversation) {
    const index = this.conversations.findIndex((c) => c.id === conversation.id);
    if (index >= 0) this.conversations[index] = { ...this.conversations[index], ...conversation };
    else this.conversations.unshift(conversation);
    this.render();
  }

  remove(id) {
    this.conversations = this.conversations.filter((c) => c.id !== id);
    this.render();
  }

  setActive(id) {
    this.activeId = id;
    this.signature = null;
    for (const item of this.list.children) {
      const active = item.dataset.id === id;
      item.classList.toggle("active", active);
      const link = item.querySelector(".conv-link");
      if (link) {
        if (active) link.setAttribute("aria-current", "page");
        else link.removeAttribute("aria-current");
      }
    }
  }

  /** The open conversation's running state is known live, better than the last list fetch. */
  setRunning(id, running) {
    const conversation = this.get(id);
    if (!conversation || Boolean(conversation.running) === running) return;
    conversation.running = running;
    this.signature = null;
    const item = this.list.querySelector(`li[data-id="${CSS.escape(id)}"]`);
    if (item) item.classList.toggle("running", running);
  }

  render() {
    if (this.editingId) return; // do not pull the input away from the user's typing
    // The list is refreshed every few seconds: redraw only when something changed, and
    // give keyboard focus back to the same control of the same conversation.
    const now = new Date();
    const groups = this.terms.length ? null : this.conversations.map((c) => dateGroup(c.updated_at, now));
    const signature = JSON.stringify([this.activeId, this.terms, groups && groups.map((g) => g.label),
      this.conversations.map((c) => [c.id, c.title, Boolean(c.running), c.snippet, c.source])]);
    if (signature === this.signature) return;
    this.signature = signature;
    const focused = this.list.contains(document.activeElement) ? document.activeElement : null;
    const focusId = focused && focused.closest("li.conv-item")?.dataset.id;
    const focusAction = focused && (focused.dataset.action || "link");
    const fragment = document.createDocumentFragment();
    this.conversations.forEach((conversation, index) => {
      if (groups && (index === 0 || groups[index].key !== groups[index - 1].key)) {
        fragment.append(h("li", { className: "conv-group", dataset: { group: groups[index].key } },
          h("h3", { className: "conv-group-label", text: groups[index].label })));
      }
      fragment.append(this.renderItem(conversation));
    });
    this.list.replaceChildren(fragment);
    this.list.dataset.empty = String(this.conversations.length === 0);
    if (focusId) {
      const item = this.list.querySelector(`li[data-id="${CSS.escape(focusId)}"]`);
      const target = item && (focusAction === "link" ? item.querySelector(".conv-link") : item.querySelector(`[data-action="${focusAction}"]`));
      if (target) target.focus();
    }
  }

  renderItem(conversation) {
    const title = conversationTitle(conversation);
    const link = h("a", { className: "conv-link", href: `/?c=${encodeURIComponent(conversation.id)}`, dataset: { id: conversation.id } },
      icon("chat", "icon conv-icon"),
      h("span", { className: "conv-text" },
        h("span", { className: "conv-title" }, highlighted(title, this.terms)),
        typeof conversation.snippet === "string" && conversation.snippet !== title
          ? h("span", { className: "conv-snippet" }, highlighted(conversation.snippet, this.terms))
          : null),
      conversation.source === "api"
        ? h("span", { className: "conv-tag conv-tag-api", text: "API", title: t("Started through the OpenAI-compatible API") })
        : null,
      h("span", { className: "running-dot", title: t("Running"), "aria-hidden": "true" }),
      h("span", { className: "visually-hidden running-label", text: ` (${t("running")})` }));
    const rename = h("button", { type: "button", className: "icon-btn", dataset: { action: "rename" },
      "aria-label": tf("Rename “%s”", [title]), title: t("Rename") }, icon("pencil"));
    const remove = h("button", { type: "button", className: "icon-btn danger", dataset: { action: "delete" },
      "aria-label": tf("Delete “%s”", [title]), title: t("Delete") }, icon("trash"));
    const item = h("li", { className: "conv-item", dataset: { id: conversation.id } }, link,
      h("div", { className: "conv-actions" }, rename, remove));
    item.classList.toggle("running", Boolean(conversation.running));
    if (conversation.id === this.activeId) {
      item.classList.add("active");
      link.setAttribute("aria-current", "page");
    }
    return item;
  }

  onClick(event) {
    const item = event.target.closest("li.conv-item");
    if (!item) return;
    const id = item.dataset.id;
    const action = event.target.closest("[data-action]");
    if (action && action.dataset.action === "rename") {
      this.startRename(item, id);
      return;
    }
    if (action && action.dataset.action === "delete") {
      this.hooks.onDelete(id);
      return;
    }
    const link = event.target.closest("a.conv-link");
    if (link && !(event.ctrlKey || event.metaKey || event.shiftKey || event.button === 1)) {
      event.preventDefault();
      this.hooks.onSelect(id);
    }
  }

  startRename(item, id) {
    const conversation = this.get(id);
    if (!conversation) return;
    this.editingId = id;
    const input = h("input", { type: "text", className: "rename-input", maxlength: "200", "aria-label": t("New title") });
    input.value = conversation.title || "";
    const link = item.querySelector(".conv-link");
    link.replaceWith(input);
    item.classList.add("editing");
    input.focus();
    input.select();
    let done = false;
    const finish = async (save) => {
      if (done) return;
      done = true;
      this.editingId = null;
      this.signature = null;
      const title = input.value.trim();
      if (save && title && title !== conversation.title) {
        try {
          const updated = await this.hooks.onRename(id, title);
          this.upsert(updated || { id, title });
        } catch {
          this.render();
        }
      } else {
        this.render();
      }
      const again = this.list.querySelector(`li[data-id="${CSS.escape(id)}"] .conv-link`);
      if (again) again.focus();
    };
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.isComposing) {
        event.preventDefault();
        finish(true);
      } else if (event.key === "Escape") {
        event.preventDefault();
        finish(false);
      }
    });
    input.addEventListener("blur", () => finish(true));
  }
}
