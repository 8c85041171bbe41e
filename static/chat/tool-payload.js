// How a tool call's payloads are shown: arguments as a one-line preview in the summary,
// arguments and result pretty-printed when JSON, and long text folded behind "Show all".
import { h } from "./dom.js";
import { tf } from "./i18n.js";

const RESULT_FOLD_CHARS = 1500;
const RESULT_FOLD_LINES = 24;

export function prettyJson(text) {
  if (typeof text !== "string") return JSON.stringify(text, null, 2);
  const trimmed = text.trim();
  if (!trimmed.startsWith("{") && !trimmed.startsWith("[")) return text;
  try {
    return JSON.stringify(JSON.parse(trimmed), null, 2);
  } catch {
    return text;
  }
}

export function argumentsPreview(text) {
  let preview = text || "";
  try {
    const value = JSON.parse(preview);
    if (value && typeof value === "object" && !Array.isArray(value)) {
      const values = Object.values(value);
      preview = values.length === 1 && typeof values[0] === "string" ? values[0] : JSON.stringify(value);
    }
  } catch {
    // not JSON: show as sent
  }
  preview = preview.replace(/\s+/g, " ").trim();
  return preview.length > 80 ? `${preview.slice(0, 79)}…` : preview;
}

/** A <pre> with long text folded to its first lines and a button to show the rest. */
export function foldedPre(text, className) {
  const pre = h("pre", { className, tabindex: "0" }); // scrolls when long: by keyboard too
  const lines = text.split("\n");
  const long = text.length > RESULT_FOLD_CHARS || lines.length > RESULT_FOLD_LINES;
  if (!long) {
    pre.textContent = text;
    return pre;
  }
  let head = lines.slice(0, RESULT_FOLD_LINES).join("\n");
  if (head.length > RESULT_FOLD_CHARS) head = head.slice(0, RESULT_FOLD_CHARS);
  pre.textContent = `${head}\n…`;
  pre.classList.add("folded");
  const more = h("button", {
    type: "button",
    className: "btn btn-small btn-ghost show-all",
    text: tf("Show all (%s characters)", [text.length.toLocaleString()]),
  });
  more.addEventListener("click", () => {
    pre.textContent = text;
    pre.classList.remove("folded");
    more.remove();
  });
  const wrap = h("div", { className: "fold-wrap" }, pre, more);
  return wrap;
}
