// The user's message in a turn, past its text: the buttons beside it (the versions of the
// question ‹ n / m ›, made by edits; edit), the edit form, and its files as chips. Functions
// of a Turn (timeline.js), which keeps the message's state and its elements.
import { fileChip, humanSize, thumbnail } from "./attachments.js";
import { h } from "./dom.js";
import { t } from "./i18n.js";
import { versionSwitcher } from "./switcher.js";

export function mountUserActions(turn) {
  turn.questionVersions = versionSwitcher(
    { group: t("Versions of this message"), previous: t("Previous version"), next: t("Next version") },
    "version",
    (step) => turn.actions?.showVersion(turn, step, "question"),
  );
  turn.editButton = h("button", { type: "button", className: "turn-action", dataset: { action: "edit" },
    "aria-label": t("Edit this message"), title: t("Edit this message"), text: t("Edit") });
  turn.editButton.addEventListener("click", () => startEdit(turn));
  return h("div", { className: "msg-actions" }, turn.questionVersions.el, turn.editButton);
}

/** The user's message becomes a text box; saving sends an edit (a new version of this turn). */
function startEdit(turn) {
  if (turn.editor || !turn.el) return;
  const input = h("textarea", { className: "edit-input", rows: "3", "aria-label": t("Edit your message") });
  input.value = turn.userText ?? "";
  const save = h("button", { type: "submit", className: "btn btn-primary", text: t("Send") });
  const cancel = h("button", { type: "button", className: "btn", text: t("Cancel") });
  turn.editor = h("form", { className: "edit-form" }, input, h("div", { className: "edit-buttons" }, cancel, save));
  turn.editor.addEventListener("submit", (event) => {
    event.preventDefault();
    const content = input.value.trim();
    if (content && turn.actions?.edit(turn, content)) stopEdit(turn);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape") stopEdit(turn);
  });
  cancel.addEventListener("click", () => stopEdit(turn));
  turn.userMsg.classList.add("is-editing");
  turn.userBubble.after(turn.editor);
  input.focus();
}

function stopEdit(turn) {
  if (!turn.editor) return;
  turn.editor.remove();
  turn.editor = null;
  turn.userMsg.classList.remove("is-editing");
}

/** The message's files as chips that download them (names as text only). */
export function updateAttachments(turn) {
  turn.attachmentList.replaceChildren(...turn.attachments.map((file) => {
    const chip = fileChip(
      String(file.path),
      h("span", { className: "chip-meta", text: Number.isInteger(file.size) ? humanSize(file.size) : "" }),
      { href: turn.actions ? turn.actions.fileUrl(String(file.path)) : null },
    );
    if (file.image && typeof file.image === "object" && turn.actions && turn.actions.thumbnailUrl) {
      chip.classList.add("has-thumb");
      chip.prepend(thumbnail(turn.actions.thumbnailUrl(String(file.path)), String(file.path)));
    }
    return chip;
  }));
  turn.attachmentList.hidden = turn.attachments.length === 0;
}

export function updateVersions(turn) {
  turn.questionVersions.update(turn.version, turn.versions);
  // Without a stored user_message (cannot happen) there is nothing to edit or answer again;
  // a shared snapshot (actions.readOnly, shared.js) is only read.
  turn.editButton.hidden = turn.seq === null || Boolean(turn.actions?.readOnly);
}
