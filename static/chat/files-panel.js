// The open conversation's files (its workspace: uploads and what the agent wrote), in a small
// panel under the header: each with its size, a download link and a delete button. Names are
// shown as text only; downloads are attachments the server never lets render.
import { api } from "./api.js";
import { humanSize } from "./attachments.js";
import { h } from "./dom.js";
import { icon } from "./icons.js";
import { confirmDialog, showNotice } from "./notices.js";
import { t, tf } from "./i18n.js";

export class FilesPanel {
  constructor({ toggle, panel, list, close }) {
    this.toggle = toggle;
    this.panel = panel;
    this.list = list;
    this.conversationId = null;
    this.loading = null;
    toggle.addEventListener("click", () => this.setOpen(this.panel.hidden));
    close.addEventListener("click", () => this.setOpen(false));
    panel.addEventListener("keydown", (event) => {
      if (event.key === "Escape") {
        this.setOpen(false);
        toggle.focus();
      }
    });
  }

  /** Follows the open conversation (null: a draft, which has no files). */
  show(conversationId) {
    if (conversationId === this.conversationId) return;
    this.conversationId = conversationId;
    this.toggle.hidden = !conversationId;
    this.list.replaceChildren();
    if (!conversationId) this.setOpen(false);
    else if (!this.panel.hidden) this.refresh();
  }

  setOpen(open) {
    this.panel.hidden = !open;
    this.toggle.setAttribute("aria-expanded", String(open));
    if (open) this.refresh();
  }

  /** Reads the list again, when the panel is open (after an upload, or a run that wrote files). */
  async refresh() {
    const id = this.conversationId;
    if (!id || this.panel.hidden) return;
    this.panel.setAttribute("aria-busy", "true");
    try {
      const files = await api.files(id);
      if (id === this.conversationId) this.render(files);
    } catch (error) {
      if (id === this.conversationId) showNotice(tf("Could not list the files: %s", [error.message]));
    } finally {
      this.panel.removeAttribute("aria-busy");
    }
  }

  render(files) {
    this.panel.dataset.empty = String(files.length === 0);
    this.list.replaceChildren(...files.map((file) => this.row(file)));
  }

  row(file) {
    const remove = h("button", { type: "button", className: "icon-btn file-delete", "aria-label": tf("Delete %s", [file.path]), title: t("Delete") }, icon("trash"));
    remove.addEventListener("click", () => this.remove(file.path));
    return h("li", { className: "file-row", dataset: { path: file.path } },
      h("a", { className: "file-name", href: api.fileUrl(this.conversationId, file.path), download: "", text: file.path, title: tf("Download %s", [file.path]) }),
      h("span", { className: "file-size", text: humanSize(file.size) }),
      h("a", { className: "icon-btn file-download", href: api.fileUrl(this.conversationId, file.path), download: "", "aria-label": tf("Download %s", [file.path]), title: t("Download") }, icon("download")),
      remove);
  }

  async remove(path) {
    if (!(await confirmDialog(tf("Delete the file “%s”?", [path]), { title: t("Delete file") }))) return;
    try {
      await api.deleteFile(this.conversationId, path);
    } catch (error) {
      showNotice(tf("Could not delete: %s", [error.message]));
    }
    this.refresh();
  }
}
