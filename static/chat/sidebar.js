// The list of the user's conversations: the pinned ones first under their own heading, then the
// others newest first under date headings (date-groups.js), a mark on running ones, switch
// without reloading. The server sends it in pages (docs/protocol.md, "Conversations"); older pages
// load as the list is scrolled to its end. While a search is on, the list holds its hits instead,
// best first (the server ranks them, so no date headings), each with its snippet, the words
// marked. The Archived view lists the archived ones alone.
//
// Each conversation is one Tab stop, its link (Enter opens it). Its actions (rename, pin, archive,
// delete) are in a menu: the "⋯" button (a click; not a Tab stop of its own), or from the link the
// → key, Shift+F10 or the context menu key; F2 renames; ↑ and ↓ move between conversations.
import { dateGroup } from "./date-groups.js";
import { h } from "./dom.js";
import { icon } from "./icons.js";
import { t, tf } from "./i18n.js";
import { highlighted, queryTerms } from "./search.js";

export function conversationTitle(conversation) {
  return (conversation && conversation.title && conversation.title.trim()) || t("New conversation");
}

// The list's order, as the server's: pinned, updated_at, then id, all descending. Django writes
// microseconds only when they are not zero, so the fraction is padded before comparing text.
function orderKey(conversation) {
  const stamp = String(conversation.updated_at || "").replace(/^([^.+Z]{19})(?:\.(\d+))?/, (_, whole, fraction) => `${whole}.${(fraction || "").padEnd(6, "0")}`);
  return `${conversation.pinned ? 1 : 0}|${stamp}|${conversation.id}`;
}

const MENU_KEYS = new Set(["ArrowRight", "ContextMenu"]);

export class Sidebar {
  /**
   * @param {HTMLElement} list  the <ul>
   * @param {object} hooks  onSelect(id), onRename(id, title) -> Promise, onDelete(id) -> Promise,
   *   onUpdate(id, {pinned?, archived?}) -> Promise<conversation>, onView() (the view changed: the
   *   list is to be fetched again), loadPage(before) -> Promise<{conversations, next}>
   */
  constructor(list, hooks) {
    this.list = list;
    this.hooks = hooks;
    this.conversations = [];
    this.activeId = null;
    this.runningOverride = new Map();
    // Titles generated while this page is open (their `title` frames): a list fetched before one
    // was stored and answered after its frame must not put the first message back.
    this.generatedTitles = new Map();
    this.editingId = null;
    this.signature = null;
    this.next = null; // the cursor of the page after the ones shown; null: nothing older
    this.extended = false; // pages past the first are shown
    this.loading = false;
    this.terms = []; // the words of the search shown; none: the whole list
    this.archived = false; // the Archived view: the archived conversations alone
    this.menuFor = null; // the id of the conversation whose menu is open
    this.menu = h("div", { className: "menu conv-menu", role: "menu", id: "conversation-menu", hidden: true });
    this.menu.addEventListener("keydown", (event) => this.onMenuKey(event));
    // Focus leaving the menu closes it; to its own "⋯" button, the button's click does.
    this.menu.addEventListener("focusout", (event) => {
      const to = event.relatedTarget;
      if (!this.menu.contains(to) && !(to && to.closest && to.closest(".conv-menu-toggle"))) this.closeMenu(false);
    });
    document.addEventListener("click", (event) => {
      if (this.menuFor && !this.menu.contains(event.target) && !event.target.closest(".conv-menu-toggle")) this.closeMenu(false);
    });
    list.addEventListener("click", (event) => this.onClick(event));
    list.addEventListener("keydown", (event) => this.onKey(event));
    this.viewToggle = document.getElementById("archived-toggle");
    this.label = document.getElementById("conversations-label");
    this.viewToggle.addEventListener("click", () => this.setArchived(!this.archived));
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
    const first = ((page && page.conversations) || []).map((c) => this.withGeneratedTitle(c));
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
    this.restart();
  }

  /** The Archived view (true) or the list (false); the next first page replaces the whole list. */
  setArchived(archived) {
    if (this.archived === archived) return;
    this.archived = archived;
    this.list.dataset.archived = String(archived);
    this.viewToggle.setAttribute("aria-pressed", String(archived));
    this.label.textContent = archived ? this.label.dataset.archived : this.label.dataset.list;
    this.closeMenu(false);
    this.conversations = [];
    this.restart();
    this.render();
    this.hooks.onView();
  }

  restart() {
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
    if (Boolean(conversation.archived) !== this.archived) {
      if (conversation.archived) return; // not in the list
      this.setArchived(false); // a new or imported one: back to the list, where it is
    }
    const index = this.conversations.findIndex((c) => c.id === conversation.id);
    if (index >= 0) this.conversations[index] = { ...this.conversations[index], ...conversation };
    else {
      // The newest of its kind: first, or first below the pinned ones.
      const at = conversation.pinned ? 0 : this.conversations.findIndex((c) => !c.pinned);
      this.conversations.splice(at < 0 ? this.conversations.length : at, 0, conversation);
    }
    this.render();
  }

  remove(id) {
    this.conversations = this.conversations.filter((c) => c.id !== id);
    this.render();
  }

  /** A fetched conversation, with the title its frame brought when the fetch predates it. */
  withGeneratedTitle(conversation) {
    const title = this.generatedTitles.get(conversation.id);
    if (title === undefined || conversation.titleSource !== "default") return conversation;
    return { ...conversation, title, titleSource: "generated" };
  }

  /** A title generated for a conversation (its `title` frame), shown at once. */
  setTitle(id, title) {
    const conversation = this.get(id);
    if (!conversation || conversation.titleSource === "user") return;
    this.generatedTitles.set(id, title);
    conversation.title = title;
    conversation.titleSource = "generated";
    this.render();
  }

  /** A conversation's new state from the server: kept in place, or taken out of a view it left. */
  updated(conversation) {
    if (Boolean(conversation.archived) !== this.archived) {
      this.remove(conversation.id);
      return;
    }
    const index = this.conversations.findIndex((c) => c.id === conversation.id);
    if (index < 0) return;
    this.conversations[index] = { ...this.conversations[index], ...conversation };
    this.conversations.sort((a, b) => (this.terms.length ? Number(Boolean(b.pinned)) - Number(Boolean(a.pinned)) : orderKey(b).localeCompare(orderKey(a))));
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
    // Not while the user types a title or chooses in a menu: the next refresh draws it.
    if (this.editingId || this.menuFor) return;
    // The list is refreshed every few seconds: redraw only when something changed, and
    // give keyboard focus back to the same conversation.
    const now = new Date();
    const groups = this.terms.length ? null : this.conversations.map((c) => (c.pinned ? { key: "pinned", label: t("Pinned") } : dateGroup(c.updated_at, now)));
    const signature = JSON.stringify([this.activeId, this.terms, this.archived, groups && groups.map((g) => g.label),
      this.conversations.map((c) => [c.id, c.title, Boolean(c.running), c.snippet, c.source, Boolean(c.pinned)])]);
    if (signature === this.signature) return;
    this.signature = signature;
    const focused = this.list.contains(document.activeElement) ? document.activeElement : null;
    const focusId = focused && focused.closest("li.conv-item")?.dataset.id;
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
      const link = this.list.querySelector(`li[data-id="${CSS.escape(focusId)}"] .conv-link`);
      if (link) link.focus();
    }
  }

  renderItem(conversation) {
    const title = conversationTitle(conversation);
    const link = h("a", { className: "conv-link", href: `/?c=${encodeURIComponent(conversation.id)}`, dataset: { id: conversation.id },
      "aria-describedby": "conversation-keys", "aria-keyshortcuts": "Shift+F10 F2" },
      icon(conversation.pinned ? "pin" : "chat", "icon conv-icon"),
      h("span", { className: "conv-text" },
        h("span", { className: "conv-title" }, highlighted(title, this.terms)),
        typeof conversation.snippet === "string" && conversation.snippet !== title
          ? h("span", { className: "conv-snippet" }, highlighted(conversation.snippet, this.terms))
          : null),
      conversation.source === "api"
        ? h("span", { className: "conv-tag conv-tag-api", text: "API", title: t("Started through the OpenAI-compatible API") })
        : null,
      conversation.source === "schedule"
        ? h("span", { className: "conv-tag conv-tag-schedule", text: t("Scheduled"), title: t("Started by a schedule") })
        : null,
      conversation.source === "trigger"
        ? h("span", { className: "conv-tag conv-tag-trigger", text: t("Triggered"), title: t("Started by a trigger") })
        : null,
      conversation.pinned ? h("span", { className: "visually-hidden", text: ` (${t("pinned")})` }) : null,
      h("span", { className: "running-dot", title: t("Running"), "aria-hidden": "true" }),
      h("span", { className: "visually-hidden running-label", text: ` (${t("running")})` }));
    // Reached from the link by the keyboard (onKey), so not a Tab stop of its own.
    const more = h("button", { type: "button", className: "icon-btn conv-menu-toggle", tabindex: "-1", dataset: { action: "menu" },
      "aria-haspopup": "menu", "aria-expanded": "false", "aria-label": tf("Actions for “%s”", [title]), title: t("Actions") }, icon("more"));
    const item = h("li", { className: "conv-item", dataset: { id: conversation.id } }, link,
      h("div", { className: "conv-actions" }, more));
    item.classList.toggle("running", Boolean(conversation.running));
    item.classList.toggle("pinned", Boolean(conversation.pinned));
    if (conversation.id === this.activeId) {
      item.classList.add("active");
      link.setAttribute("aria-current", "page");
    }
    return item;
  }

  // --- the menu of a conversation's actions --------------------------------------------------
  openMenu(item) {
    const id = item.dataset.id;
    const conversation = this.get(id);
    if (!conversation) return;
    if (this.menuFor) this.closeMenu(false);
    const title = conversationTitle(conversation);
    const entry = (action, iconName, text) =>
      h("button", { type: "button", className: "menu-item conv-menu-item", role: "menuitem", tabindex: "-1", dataset: { action } },
        h("span", { className: "menu-line" }, icon(iconName, "icon"), h("span", { text })));
    this.menu.replaceChildren(
      entry("rename", "pencil", t("Rename")),
      this.archived ? null : entry(conversation.pinned ? "unpin" : "pin", "pin", conversation.pinned ? t("Unpin") : t("Pin")),
      entry(conversation.archived ? "unarchive" : "archive", "archive", conversation.archived ? t("Unarchive") : t("Archive")),
      entry("delete", "trash", t("Delete")),
    );
    this.menu.setAttribute("aria-label", tf("Actions for “%s”", [title]));
    this.menu.dataset.id = id;
    this.menuFor = id;
    const toggle = item.querySelector(".conv-menu-toggle");
    toggle.setAttribute("aria-expanded", "true");
    toggle.setAttribute("aria-controls", this.menu.id);
    item.classList.add("menu-open");
    item.append(this.menu);
    this.menu.hidden = false;
    // Below the row, or above it when the list's end would hide it.
    this.menu.classList.remove("above");
    const nav = this.list.closest(".conv-nav");
    if (nav && this.menu.getBoundingClientRect().bottom > nav.getBoundingClientRect().bottom) this.menu.classList.add("above");
    this.menu.querySelector("[role=menuitem]").focus();
  }

  closeMenu(refocus) {
    const id = this.menuFor;
    if (!id) return;
    this.menuFor = null;
    this.menu.hidden = true;
    const item = this.menu.parentElement;
    this.menu.remove();
    if (item) {
      item.classList.remove("menu-open");
      const toggle = item.querySelector(".conv-menu-toggle");
      if (toggle) toggle.setAttribute("aria-expanded", "false");
    }
    if (refocus) this.focusLink(id);
    this.render(); // what a refresh brought meanwhile
  }

  focusLink(id) {
    const link = this.list.querySelector(`li[data-id="${CSS.escape(id)}"] .conv-link`);
    if (link) link.focus();
  }

  onMenuKey(event) {
    const items = [...this.menu.querySelectorAll("[role=menuitem]")];
    const at = items.indexOf(document.activeElement);
    const go = (index) => {
      event.preventDefault();
      items[(index + items.length) % items.length].focus();
    };
    if (event.key === "ArrowDown") go(at + 1);
    else if (event.key === "ArrowUp") go(at - 1);
    else if (event.key === "Home") go(0);
    else if (event.key === "End") go(items.length - 1);
    else if (event.key === "Escape" || event.key === "ArrowLeft") {
      event.preventDefault();
      event.stopPropagation();
      this.closeMenu(true);
    } else if (event.key === "Tab") this.closeMenu(false);
  }

  async act(id, action) {
    this.closeMenu(action !== "rename");
    const item = this.list.querySelector(`li[data-id="${CSS.escape(id)}"]`);
    if (action === "rename") {
      if (item) this.startRename(item, id);
      return;
    }
    // Focus stays in the list: on the same conversation, or on its neighbour once it left the view.
    const at = [...this.list.querySelectorAll(".conv-link")].findIndex((link) => link.dataset.id === id);
    if (action === "delete") {
      await this.hooks.onDelete(id);
    } else {
      const change = { pin: { pinned: true }, unpin: { pinned: false }, archive: { archived: true }, unarchive: { archived: false } }[action];
      const updated = change && (await this.hooks.onUpdate(id, change));
      if (updated) this.updated(updated);
    }
    if (this.get(id)) this.focusLink(id);
    else {
      const left = [...this.list.querySelectorAll(".conv-link")];
      const neighbour = left[Math.min(at, left.length - 1)];
      if (neighbour) neighbour.focus();
    }
  }

  onClick(event) {
    const menuItem = event.target.closest(".conv-menu-item");
    if (menuItem) {
      this.act(this.menu.dataset.id, menuItem.dataset.action);
      return;
    }
    const item = event.target.closest("li.conv-item");
    if (!item) return;
    const id = item.dataset.id;
    if (event.target.closest("[data-action=menu]")) {
      if (this.menuFor === id) this.closeMenu(true);
      else this.openMenu(item);
      return;
    }
    const link = event.target.closest("a.conv-link");
    if (link && !(event.ctrlKey || event.metaKey || event.shiftKey || event.button === 1)) {
      event.preventDefault();
      this.hooks.onSelect(id);
    }
  }

  /** On a conversation's link: its menu, renaming, moving to the next or previous one. */
  onKey(event) {
    const link = event.target.closest("a.conv-link");
    if (!link || event.altKey || event.ctrlKey || event.metaKey) return;
    const item = link.closest("li.conv-item");
    if (MENU_KEYS.has(event.key) || (event.key === "F10" && event.shiftKey)) {
      event.preventDefault();
      this.openMenu(item);
    } else if (event.key === "F2") {
      event.preventDefault();
      this.startRename(item, item.dataset.id);
    } else if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      const links = [...this.list.querySelectorAll(".conv-link")];
      const next = links[links.indexOf(link) + (event.key === "ArrowDown" ? 1 : -1)];
      if (next) {
        event.preventDefault();
        next.focus();
      }
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
