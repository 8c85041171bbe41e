// What the page tells the user outside the timeline: the passing notice above the composer,
// announcements for screen readers, and the confirmation dialog.
const NOTICE_MS = 8000;

const notice = document.getElementById("notice");
const noticeText = document.getElementById("notice-text");
const srStatus = document.getElementById("sr-status");
const dialog = document.getElementById("confirm-dialog");
const dialogText = document.getElementById("confirm-text");
const dialogTitle = document.getElementById("confirm-title");
const defaultTitle = dialogTitle.textContent; // "Delete conversation"

let noticeTimer = null;

/** Shows `text` above the composer for a while: a problem, or with kind "info" news that is not one. */
export function showNotice(text, { kind = "error" } = {}) {
  noticeText.textContent = text;
  notice.dataset.kind = kind;
  notice.hidden = false;
  clearTimeout(noticeTimer);
  noticeTimer = setTimeout(() => {
    notice.hidden = true;
  }, NOTICE_MS);
}

document.getElementById("notice-close").addEventListener("click", () => {
  notice.hidden = true;
});

export function announce(text) {
  srStatus.textContent = "";
  requestAnimationFrame(() => {
    srStatus.textContent = text;
  });
}

/** Resolves to true when the user confirms, false when they cancel or press Escape. */
export function confirmDialog(text, { title = defaultTitle } = {}) {
  dialogText.textContent = text;
  dialogTitle.textContent = title;
  return new Promise((resolve) => {
    const onClose = () => {
      dialog.removeEventListener("close", onClose);
      resolve(dialog.returnValue === "confirm");
    };
    dialog.returnValue = "";
    dialog.addEventListener("close", onClose);
    dialog.showModal();
    dialog.querySelector("[value=cancel]").focus();
  });
}
