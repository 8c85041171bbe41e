// The thumbs under a finished answer: up or down, then an optional comment. One rating per run,
// replaced when changed (POST /api/runs/<id>/feedback/); the ratings already given come with the
// conversation (GET /api/conversations/<id>/feedback/) so that a reload shows the chosen thumb.
import { api } from "./api.js";
import { h } from "./dom.js";
import { t } from "./i18n.js";
import { icon } from "./icons.js";

export class FeedbackBar {
  constructor(runId) {
    this.runId = runId;
    this.rating = 0; // 1, -1, or 0 before any
    this.comment = "";
    this.el = null;
  }

  /** A rating given earlier (from the conversation's feedback list). */
  set(feedback) {
    this.rating = feedback.rating;
    this.comment = feedback.comment || "";
    if (this.el) this.update();
  }

  mount() {
    this.up = this.thumb(1, "thumbUp", t("Good answer"));
    this.down = this.thumb(-1, "thumbDown", t("Bad answer"));
    this.input = h("input", { type: "text", className: "feedback-comment", maxlength: "2000",
      placeholder: t("What was good or bad? (optional)"), "aria-label": t("Comment on the answer") });
    this.form = h("form", { className: "feedback-form", hidden: true }, this.input,
      h("button", { type: "submit", className: "btn btn-small", text: t("Send") }));
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.save(this.rating, this.input.value.trim());
    });
    this.note = h("span", { className: "feedback-note", role: "status" });
    this.el = h("div", { className: "feedback" }, this.up, this.down, this.note, this.form);
    this.update();
    return this.el;
  }

  thumb(rating, iconName, label) {
    const button = h("button", { type: "button", className: "icon-btn feedback-thumb", "aria-label": label,
      title: label, dataset: { rating: String(rating) } }, icon(iconName));
    button.addEventListener("click", () => {
      if (rating === this.rating) {
        this.form.hidden = !this.form.hidden; // the chosen thumb again: show or hide the comment
        return;
      }
      this.save(rating, this.comment, true);
    });
    return button;
  }

  async save(rating, comment, openComment = false) {
    this.note.textContent = "";
    try {
      this.set(await api.rateRun(this.runId, { rating, comment }));
      this.note.textContent = openComment ? "" : t("Thanks for the feedback.");
      if (openComment) {
        this.form.hidden = false;
        this.input.focus();
      } else {
        this.form.hidden = true;
      }
    } catch (error) {
      this.note.textContent = t("Could not save the feedback.");
    }
  }

  update() {
    for (const button of [this.up, this.down]) {
      button.setAttribute("aria-pressed", String(Number(button.dataset.rating) === this.rating));
    }
    if (document.activeElement !== this.input) this.input.value = this.comment;
  }
}
