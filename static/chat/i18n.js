// Strings for the scripts, translated by Django and handed over in a JSON data block
// (<script type="application/json">, which the CSP does not treat as script).
let strings = null;

function load() {
  if (strings === null) {
    const node = document.getElementById("i18n-strings");
    try {
      strings = node ? JSON.parse(node.textContent) : {};
    } catch {
      strings = {};
    }
  }
  return strings;
}

/** The translation of an English message id, or the id itself. */
export function t(message) {
  const value = load()[message];
  return typeof value === "string" && value ? value : message;
}

/** t() with %s / %(name)s placeholders filled in. */
export function tf(message, values) {
  let text = t(message);
  if (Array.isArray(values)) {
    for (const value of values) text = text.replace("%s", String(value));
    return text;
  }
  return text.replace(/%\((\w+)\)s/g, (_, key) => (key in values ? String(values[key]) : ""));
}
