// Files to send with the next message: each is uploaded into the open conversation's
// workspace as soon as it is picked (paperclip, drop or paste) and shown as a removable chip
// with its progress or its error. The message names the uploaded ones (`attachments`).
// Names are shown as text only.
import { api } from "./api.js";
import { h } from "./dom.js";
import { icon } from "./icons.js";
import { t, tf } from "./i18n.js";

/** "12.3 KB" */
export function humanSize(bytes) {
  const units = ["bytes", "KB", "MB", "GB"];
  let size = Number(bytes) || 0;
  let unit = 0;
  while (size >= 1000 && unit < units.length - 1) {
    size /= 1000;
    unit += 1;
  }
  return unit === 0 ? `${size} ${units[0]}` : `${size.toFixed(1)} ${units[unit]}`;
}

/** An image file's thumbnail (the server's re-encoded copy), its name as the alternative text. */
export function thumbnail(src, name) {
  return h("img", { className: "thumb", src, alt: tf("Image: %s", [name]), loading: "lazy", decoding: "async" });
}

/** A chip naming a file; `extra` (a node or text) follows the name. */
export function fileChip(name, extra, { className = "", href = null } = {}) {
  const label = href
    ? h("a", { className: "chip-name", href, download: "", text: name, title: name })
    : h("span", { className: "chip-name", text: name, title: name });
  return h("span", { className: `chip ${className}`.trim() }, icon("paperclip", "icon chip-icon"), label, extra);
}

/** On a phone the chips are one row that scrolls sideways: the newest is brought into view. */
function reveal(each) {
  each.el.scrollIntoView({ block: "nearest", inline: "nearest" });
}

class Pending {
  constructor(file) {
    this.file = file;
    this.name = file.name || "pasted-file";
    this.status = "uploading"; // then "ready" or "failed"
    this.path = null;
    this.image = false;
    this.abort = new AbortController();
    this.progress = h("progress", { className: "chip-progress", max: "1", value: "0", "aria-label": tf("Uploading %s", [this.name]) });
    this.meta = h("span", { className: "chip-meta", text: humanSize(file.size) });
    this.remove = h("button", { type: "button", className: "chip-remove", "aria-label": tf("Remove %s", [this.name]), title: t("Remove") }, icon("close"));
    this.el = fileChip(this.name, h("span", { className: "chip-extra" }, this.meta, this.progress, this.remove), { className: "is-uploading" });
  }

  set(status, text = null) {
    this.status = status;
    this.el.classList.toggle("is-uploading", status === "uploading");
    this.el.classList.toggle("is-failed", status === "failed");
    this.el.dataset.status = status;
    this.progress.hidden = status !== "uploading";
    if (text !== null) this.meta.textContent = text;
  }
}

export class Attachments {
  /**
   * @param {HTMLElement} list  where the chips go
   * @param {object} hooks  conversationId(fileNames): the open conversation's id, creating it
   *                        first when there is none, named after the files (a promise);
   *                        onChange(): the pending set changed;
   *                        onError(text); onUploaded(): a file arrived in the workspace
   */
  constructor(list, hooks) {
    this.list = list;
    this.hooks = hooks;
    this.pending = [];
    this.conversationId = null;
    this.creating = false;
  }

  get uploading() {
    return this.pending.some((each) => each.status === "uploading");
  }

  /** Whether an uploaded file is an image (known by its content, the server's "image"). */
  get hasImages() {
    return this.pending.some((each) => each.status === "ready" && each.image);
  }

  /** The workspace paths of the files uploaded so far. */
  get paths() {
    return this.pending.filter((each) => each.status === "ready").map((each) => each.path);
  }

  async add(files) {
    const picked = [...files].map((file) => new Pending(file));
    if (!picked.length) return;
    for (const each of picked) {
      each.remove.addEventListener("click", () => this.drop(each));
      this.pending.push(each);
      this.list.append(each.el);
    }
    this.render();
    reveal(picked[picked.length - 1]);
    let id;
    this.creating = true; // a draft's conversation being opened for them must not clear them
    try {
      id = await this.hooks.conversationId(picked.map((each) => each.name));
    } catch (error) {
      for (const each of picked) this.failed(each, error.message);
      return;
    } finally {
      this.creating = false;
    }
    this.conversationId = id;
    await Promise.all(picked.map((each) => this.upload(id, each)));
  }

  async upload(id, each) {
    try {
      const stored = await api.uploadFile(id, each.file, (fraction) => {
        each.progress.value = String(fraction);
      }, each.abort.signal);
      if (!this.pending.includes(each)) return; // removed meanwhile
      each.path = stored.path;
      each.set("ready", humanSize(stored.size));
      // Known to be an image by its content (the server's "image"), not by its name.
      if (stored.image) {
        each.image = true;
        each.el.classList.add("has-thumb");
        const thumb = thumbnail(api.thumbnailUrl(id, stored.path), stored.path);
        // The chip is wider once its picture is in: the newest is brought into view again.
        thumb.addEventListener("load", () => {
          if (this.pending[this.pending.length - 1] === each) reveal(each);
        }, { once: true });
        each.el.prepend(thumb);
      }
      this.hooks.onUploaded();
    } catch (error) {
      if (this.pending.includes(each)) this.failed(each, error.message);
    }
    this.render();
  }

  failed(each, message) {
    each.set("failed", t("failed"));
    each.el.title = message;
    this.hooks.onError(tf("Could not upload %s: %s", [each.name, message]));
    this.render();
  }

  drop(each) {
    each.abort.abort();
    this.pending = this.pending.filter((other) => other !== each);
    each.el.remove();
    this.render();
  }

  /** Takes the uploaded files for a message being sent; the chips go. */
  take() {
    const paths = this.paths;
    this.clear();
    return paths;
  }

  /** A message that did not go through gets its files back. */
  restore(conversationId, paths) {
    if (!paths.length || this.pending.length || conversationId !== this.conversationId) return;
    for (const path of paths) {
      const each = new Pending(new File([], path));
      each.path = path;
      each.set("ready", "");
      each.remove.addEventListener("click", () => this.drop(each));
      this.pending.push(each);
      this.list.append(each.el);
    }
    this.render();
  }

  clear() {
    for (const each of this.pending) each.abort.abort();
    this.pending = [];
    this.list.replaceChildren();
    this.render();
  }

  /** Another conversation was opened: what was attached here does not belong to it. */
  follow(conversationId) {
    if (this.creating || conversationId === this.conversationId) return;
    this.conversationId = conversationId;
    if (this.pending.length) this.clear();
  }

  render() {
    this.list.hidden = this.pending.length === 0;
    this.hooks.onChange();
  }
}
