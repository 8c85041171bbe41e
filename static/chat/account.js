// The account page's "Delete account" form: the password (or the username) goes to
// POST /api/account/delete/; once it is done the browser is signed out, and goes to the sign-in page.
import { api } from "./api.js";

const form = document.getElementById("delete-account-form");
if (form) {
  const error = document.getElementById("delete-account-error");
  const field = document.getElementById("delete-account-confirm");
  const button = document.getElementById("delete-account-button");
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.hidden = true;
    if (!field.value) {
      field.focus();
      return;
    }
    button.disabled = true;
    try {
      await api.deleteAccount({ [field.name]: field.value });
      window.location.assign(form.dataset.login);
    } catch (failure) {
      error.textContent = failure.message;
      error.hidden = false;
      button.disabled = false;
      field.select();
    }
  });
}
