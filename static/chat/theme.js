// The theme switches (templates/_theme_form.html): a choice is applied at once, by giving each
// theme stylesheet (link[data-theme-sheet]) the media chat/doors/pages/theme.py would render it with,
// then saved on the account; without this script the form posts and the page comes back in it.

const SCHEMES = ["light", "dark"];

function sheetMedia(theme, scheme) {
  if (theme === "system") return `(prefers-color-scheme: ${scheme})`;
  return theme === scheme ? "all" : "not all";
}

/** Renders the page in `theme` ("light", "dark" or "system") without a reload. */
export function applyTheme(theme) {
  document.body.dataset.theme = theme;
  const meta = document.querySelector('meta[name="color-scheme"]');
  if (meta) meta.content = theme === "system" ? "light dark" : theme;
  for (const link of document.querySelectorAll("link[data-theme-sheet]")) {
    if (SCHEMES.includes(link.dataset.themeSheet)) link.media = sheetMedia(theme, link.dataset.themeSheet);
  }
  // Every switch of the page shows the choice (the chat page has one, the account page one).
  for (const select of document.querySelectorAll("form[data-theme-form] select[name=theme]")) {
    select.value = theme;
  }
}

async function save(form, theme) {
  const body = new FormData(form);
  body.set("theme", theme);
  body.delete("next"); // answered 204: the page is already in the theme
  const status = form.querySelector("[data-theme-status]");
  try {
    const response = await fetch(form.action, { method: "POST", body, credentials: "same-origin" });
    if (!response.ok) throw new Error(String(response.status));
    if (status) status.textContent = "";
  } catch {
    if (status) status.textContent = status.dataset.failed || "";
  }
}

for (const form of document.querySelectorAll("form[data-theme-form]")) {
  const select = form.querySelector("select[name=theme]");
  const button = form.querySelector(".theme-go");
  if (!select) continue;
  if (button) button.classList.add("visually-hidden");
  select.addEventListener("change", () => {
    applyTheme(select.value);
    save(form, select.value);
  });
}
