// The ‹ n / m › control that steps through versions: of a question under the user's message
// (user-message.js), of an answer under the answer (answer.js).
import { h } from "./dom.js";

/** @param {object} labels  group: what the group's versions are of; previous, next: its buttons
 *  @param {string} kind  "version" (a question) or "answer": the buttons' data-action suffix
 *  @param {function} onStep  (-1 | +1) => void */
export function versionSwitcher(labels, kind, onStep) {
  const button = (step, label, text) => {
    const el = h("button", { type: "button", className: "turn-action",
      dataset: { action: `${step < 0 ? "previous" : "next"}-${kind}` }, "aria-label": label, title: label, text });
    el.addEventListener("click", () => onStep(step));
    return el;
  };
  const previous = button(-1, labels.previous, "‹");
  const next = button(1, labels.next, "›");
  const label = h("span", { className: "version-label" });
  const el = h("div", { className: "versions", role: "group", "aria-label": labels.group }, previous, label, next);
  return {
    el,
    /** Hidden without versions; `version` of `versions`, 1-based. */
    update(version, versions) {
      el.hidden = versions < 2;
      label.textContent = `${version} / ${versions}`;
      previous.disabled = version <= 1;
      next.disabled = version >= versions;
    },
    /** Focuses the button that goes `step` further, or the other one at the last version that
     *  way (a disabled button cannot hold the focus). */
    focus(step) {
      const [toward, back] = step < 0 ? [previous, next] : [next, previous];
      (toward.disabled ? back : toward).focus();
    },
  };
}
