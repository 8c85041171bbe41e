// A small drop-down menu of links under a button (the header's Export menu): the button
// opens and closes it; Escape, a click elsewhere or choosing an item closes it; the arrow
// keys move between the items.

/** Wires `toggle` (a button with aria-controls) to `menu` (its element of links). */
export function setUpMenu(toggle, menu) {
  const items = () => [...menu.querySelectorAll("a, button")];
  const open = (focusFirst) => {
    menu.hidden = false;
    toggle.setAttribute("aria-expanded", "true");
    if (focusFirst) items()[0]?.focus();
  };
  const close = (refocus) => {
    if (menu.hidden) return;
    menu.hidden = true;
    toggle.setAttribute("aria-expanded", "false");
    if (refocus) toggle.focus();
  };
  toggle.addEventListener("click", () => (menu.hidden ? open(false) : close(false)));
  toggle.addEventListener("keydown", (event) => {
    if (event.key === "ArrowDown") {
      event.preventDefault();
      open(true);
    }
  });
  menu.addEventListener("click", (event) => {
    if (event.target.closest("a, button")) close(false);
  });
  menu.addEventListener("keydown", (event) => {
    const list = items();
    const at = list.indexOf(document.activeElement);
    if (event.key === "ArrowDown" || event.key === "ArrowUp") {
      event.preventDefault();
      const step = event.key === "ArrowDown" ? 1 : -1;
      list[(at + step + list.length) % list.length].focus();
    }
  });
  document.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && !menu.hidden) close(true);
  });
  document.addEventListener("click", (event) => {
    if (!menu.hidden && !toggle.contains(event.target) && !menu.contains(event.target)) close(false);
  });
  return { close: () => close(false) };
}
