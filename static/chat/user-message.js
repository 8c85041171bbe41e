// The user's message in a turn, past its text: the buttons beside it (versions ‹ n / m ›,
// edit), the edit form, and its files as chips. Functions of a Turn (timeline.js), which keeps
// the message's state and its elements.
import { fileChip, humanSize } from "./attachments.js";
import { h } from "./dom.js";
import { t } from "./i18n.js";

export function mountUserActions(turn) {
  const button = (action, label, text, onClick) => {
    const el = h("button", { type: "button", className: "turn-action", dataset: { action }, "aria-label": label, title: label, text });
    el.addEventListener("click", onClick);
    return el;
  };
  turn.prevVersion = button("previous-version", t("Previous version"), "‹", () => turn.actions?.showVersion(turn, -1));
  turn.nextVersion = button("next-version", t("Next version"), "›", () => turn.actions?.showVersion(turn, 1));
  turn.versionLabel = h("span", { className: "version-label" });
  turn.versionNav = h("div", { className: "versions", role: "group", "aria-label": t("Versions of this message") },
    turn.prevVersion, turn.versionLabel, turn.nextVersion);
  turn.editButton = button("edit", t("Edit this message"), t("Edit"), () => startEdit(turn));
  return h("div", { className: "msg-actions" }, turn.versionNav, turn.editButton);
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
  turn.attachmentList.replaceChildren(...turn.attachments.map((file) => fileChip(
    String(file.path),
    h("span", { className: "chip-meta", text: Number.isInteger(file.size) ? humanSize(file.size) : "" }),
    { href: turn.actions ? turn.actions.fileUrl(String(file.path)) : null },
  )));
  turn.attachmentList.hidden = turn.attachments.length === 0;
}

/** Focuses the switch that goes `step` (-1 previous, +1 next) further, or the other one at the
 * last version that way (a disabled button cannot hold the focus). */
export function focusVersionSwitch(turn, step) {
  if (!turn || !turn.el) return;
  const [toward, back] = step < 0 ? [turn.prevVersion, turn.nextVersion] : [turn.nextVersion, turn.prevVersion];
  (toward.disabled ? back : toward).focus();
}

export function updateVersions(turn) {
  turn.versionNav.hidden = turn.versions < 2;
  turn.versionLabel.textContent = `${turn.version} / ${turn.versions}`;
  turn.prevVersion.disabled = turn.version <= 1;
  turn.nextVersion.disabled = turn.version >= turn.versions;
  // Without a stored user_message (cannot happen) there is nothing to edit or answer again.
  turn.editButton.hidden = turn.seq === null;
}
