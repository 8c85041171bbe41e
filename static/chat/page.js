import "./theme.js";

// Behaviour shared by every page: the language switch submits on change.
for (const select of document.querySelectorAll("select[data-autosubmit]")) {
  const form = select.form;
  const button = form && form.querySelector(".lang-go");
  if (button) button.classList.add("visually-hidden");
  select.addEventListener("change", () => form && form.requestSubmit());
}

// A copy button (data-copy: the id of the field whose value it copies), e.g. a new API token.
for (const button of document.querySelectorAll("button[data-copy]")) {
  button.addEventListener("click", async () => {
    const field = document.getElementById(button.dataset.copy);
    if (!field) return;
    try {
      await navigator.clipboard.writeText(field.value);
    } catch {
      field.select(); // no clipboard (an insecure origin): selected, for Ctrl+C
      return;
    }
    const label = button.textContent;
    button.textContent = button.dataset.copied || label;
    setTimeout(() => { button.textContent = label; }, 2000);
  });
}

// A page answering a form's POST (a new API token shown once) names the page it is: the address
// bar shows that one, so a reload reads it again rather than posting the form a second time.
const canonical = document.querySelector("[data-page-url]");
if (canonical) history.replaceState(null, "", canonical.dataset.pageUrl);
