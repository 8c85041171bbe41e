// Behaviour shared by every page: the language switch submits on change.
for (const select of document.querySelectorAll("select[data-autosubmit]")) {
  const form = select.form;
  const button = form && form.querySelector(".lang-go");
  if (button) button.classList.add("visually-hidden");
  select.addEventListener("change", () => form && form.requestSubmit());
}
