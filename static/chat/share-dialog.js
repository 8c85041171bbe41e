// The conversation menu's "Share…": a dialog that makes a read-only link to the open
// conversation, the branch in view (with an optional expiry), offers to copy it (its token is
// shown this once: only a digest is stored), and lists the conversation's links, each with
// "Revoke".
import { api } from "./api.js";
import { h } from "./dom.js";
import { copyText } from "./markdown.js";
import { t, tf } from "./i18n.js";

const $ = (id) => document.getElementById(id);

const day = (iso) => new Date(iso).toLocaleDateString(document.documentElement.lang || undefined, { dateStyle: "medium" });

function describe(share) {
  const made = tf("made %s", [day(share.createdAt)]);
  if (!share.active) return `${made} · ${t("expired")}`;
  return `${made} · ${share.expiresAt ? tf("expires %s", [day(share.expiresAt)]) : t("does not expire")}`;
}

/** Wires the dialog to `opener` (the menu's item); `openView()` is the open conversation's view
 * (conversation.js: its `id`, and `viewedLeafSeq`, the last turn of the branch in view). */
export function setUpShareDialog(opener, openView) {
  const dialog = $("share-dialog");
  if (!opener || !dialog) return; // sharing is off on this server
  const list = $("share-list");
  const error = $("share-error");
  const fresh = $("share-new");
  const url = $("share-url");
  const copy = $("share-copy");
  const create = $("share-create-button");
  let id = null;
  let view = null;

  const fail = (text) => {
    error.textContent = text;
    error.hidden = false;
  };

  async function refresh() {
    const asked = id;
    let shares;
    try {
      shares = await api.shares(asked);
    } catch (problem) {
      fail(tf("Could not list the links: %s", [problem.message]));
      return;
    }
    if (asked !== id) return;
    list.replaceChildren(...shares.map((share) => {
      const revoke = h("button", { type: "button", className: "btn btn-small", text: t("Revoke"),
        "aria-label": tf("Revoke the link %s…", [share.hint]) });
      revoke.addEventListener("click", async () => {
        revoke.disabled = true;
        try {
          await api.revokeShare(share.id);
        } catch (problem) {
          revoke.disabled = false;
          fail(tf("Could not revoke: %s", [problem.message]));
          return;
        }
        refresh();
      });
      return h("li", { className: "share-row", dataset: { shareId: String(share.id) } },
        h("code", { className: "share-hint", text: `${share.hint}…` }),
        h("span", { className: "share-meta", text: describe(share) }), revoke);
    }));
    $("share-none").hidden = shares.length > 0;
  }

  opener.addEventListener("click", () => {
    view = openView();
    id = view ? view.id : null;
    if (!id) return;
    error.hidden = true;
    fresh.hidden = true;
    url.value = "";
    list.replaceChildren();
    dialog.showModal();
    refresh();
  });

  $("share-create").addEventListener("submit", async (event) => {
    event.preventDefault();
    error.hidden = true;
    create.disabled = true;
    const days = Number($("share-expiry").value) || null;
    try {
      const share = await api.createShare(id, days, view.viewedLeafSeq);
      url.value = new URL(share.url, window.location.origin).href;
      fresh.hidden = false;
      url.focus();
      url.select();
    } catch (problem) {
      fail(tf("Could not create the link: %s", [problem.message]));
    } finally {
      create.disabled = false;
    }
    refresh();
  });

  copy.addEventListener("click", async () => {
    const ok = await copyText(url.value);
    copy.textContent = ok ? t("Copied") : t("Copy failed");
    if (!ok) url.select();
    setTimeout(() => {
      copy.textContent = t("Copy link");
    }, 1500);
  });

  $("share-close").addEventListener("click", () => dialog.close());
}
