// The page's layout behaviour: the message list follows the newest output while the reader
// is at the bottom (with "Jump to latest" when they are not), and the conversation list is a
// drawer at phone width.
import { onAfterRender } from "./answer.js";

const STICK_DISTANCE_PX = 80;

const scroller = document.getElementById("messages-scroll");
const turns = document.getElementById("turns");
const jump = document.getElementById("jump-latest");
const sidebarToggle = document.getElementById("sidebar-toggle");
const backdrop = document.getElementById("sidebar-backdrop");
const newChat = document.getElementById("new-chat");

// --- following the newest output -----------------------------------------------------------
let stick = true; // the reader is at the bottom: keep them there

function nearBottom() {
  return scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < STICK_DISTANCE_PX;
}

/** Scrolls to the newest output if the reader is following it, or always with `force`. */
export function scrollToEnd(force) {
  if (force) stick = true;
  if (stick) scroller.scrollTop = scroller.scrollHeight;
  jump.hidden = stick;
}

/** A conversation was opened: follow its newest output. */
export function followLatest() {
  stick = true;
}

scroller.addEventListener("scroll", () => {
  stick = nearBottom();
  jump.hidden = stick;
}, { passive: true });
jump.addEventListener("click", () => {
  scrollToEnd(true);
  document.getElementById("message-input").focus();
});
onAfterRender(() => scrollToEnd(false));
// Turns change height after they are drawn (Markdown, off-screen turns rendered late):
// a reader at the bottom stays at the bottom.
new ResizeObserver(() => {
  if (stick) scroller.scrollTop = scroller.scrollHeight;
}).observe(turns);

// --- phone-width drawer --------------------------------------------------------------------
function openDrawer() {
  document.body.classList.add("drawer-open");
  sidebarToggle.setAttribute("aria-expanded", "true");
  backdrop.hidden = false;
  newChat.focus();
}

export function closeDrawer() {
  if (!document.body.classList.contains("drawer-open")) return;
  document.body.classList.remove("drawer-open");
  sidebarToggle.setAttribute("aria-expanded", "false");
  backdrop.hidden = true;
}

sidebarToggle.addEventListener("click", openDrawer);
document.getElementById("sidebar-close").addEventListener("click", () => {
  closeDrawer();
  sidebarToggle.focus();
});
backdrop.addEventListener("click", closeDrawer);
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && document.body.classList.contains("drawer-open")) {
    closeDrawer();
    sidebarToggle.focus();
  }
});
