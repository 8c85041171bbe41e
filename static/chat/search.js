// Searching the conversation list (docs/protocol.md, "Search", `?q=`): the query's words as the
// server splits them, and a title or snippet with those words marked. The server sends
// snippets as plain text; the marks are built here as elements around text nodes, so no
// text from a conversation is ever parsed as HTML.

/** The query's words, lower-cased: runs of letters, digits and marks, as chat/eventlog/search.py. */
export function queryTerms(query) {
  const words = String(query || "").toLowerCase().match(/[\p{L}\p{N}\p{M}]+/gu) || [];
  return [...new Set(words)].slice(0, 8);
}

/** A fragment of `text` with every occurrence of a term wrapped in <mark>. */
export function highlighted(text, terms) {
  const fragment = document.createDocumentFragment();
  const source = String(text || "");
  const lower = source.toLowerCase();
  // Only where lower-casing keeps the length are positions comparable; otherwise plain text.
  if (!terms.length || lower.length !== source.length) {
    fragment.append(source);
    return fragment;
  }
  let at = 0;
  while (at < source.length) {
    let best = -1;
    let length = 0;
    for (const term of terms) {
      const found = lower.indexOf(term, at);
      if (found >= 0 && (best < 0 || found < best || (found === best && term.length > length))) {
        best = found;
        length = term.length;
      }
    }
    if (best < 0) break;
    if (best > at) fragment.append(source.slice(at, best));
    const mark = document.createElement("mark");
    mark.textContent = source.slice(best, best + length);
    fragment.append(mark);
    at = best + length;
  }
  if (at < source.length) fragment.append(source.slice(at));
  return fragment;
}

/** Calls `onQuery(query)` once typing in `input` pauses; Escape clears the box. */
export function watchSearchBox(input, onQuery, { delayMs = 250 } = {}) {
  let timer = null;
  let last = "";
  const fire = () => {
    timer = null;
    const query = input.value.trim();
    if (query === last) return;
    last = query;
    onQuery(query);
  };
  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(fire, delayMs);
  });
  input.addEventListener("keydown", (event) => {
    if (event.key === "Escape" && input.value) {
      event.preventDefault();
      input.value = "";
      clearTimeout(timer);
      fire();
    } else if (event.key === "Enter") {
      event.preventDefault();
      clearTimeout(timer);
      fire();
    }
  });
}
