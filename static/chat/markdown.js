// Markdown for model and tool output: marked -> DOMPurify -> our own enhancements.
//
// Three walls keep model output inert: marked escapes raw HTML instead of passing it
// through, DOMPurify sanitises what marked produced (no script, no event handlers, only
// http(s)/mailto/relative links, images only from data: or this origin), and the page's
// Content-Security-Policy blocks whatever might still slip past both.
import { Marked } from "../vendor/marked/marked.esm.js";
import DOMPurify from "../vendor/dompurify/purify.es.mjs";
import hljs from "../vendor/highlight/highlight.min.js";
import { t } from "./i18n.js";

const HTML_ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
export const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => HTML_ESCAPES[c]);

const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    // Raw HTML in the model's text is shown as text, never interpreted.
    html({ text, block }) {
      return block ? `<p>${escapeHtml(text)}</p>` : escapeHtml(text);
    },
  },
});

const SAFE_URI = /^(?:(?:https?|mailto):|[^a-z]|[a-z+.-]+(?:[^a-z+.\-:]|$))/i;
const SAFE_DATA_IMAGE = /^data:image\/(?:png|gif|jpe?g|webp|avif);/i;
const CODE_CLASS = /^language-[\w+#.-]{1,40}$/;

const purifier = DOMPurify(window);
const SANITIZE_CONFIG = {
  RETURN_DOM_FRAGMENT: true,
  ALLOWED_URI_REGEXP: SAFE_URI,
  ALLOW_DATA_ATTR: false,
  ALLOW_ARIA_ATTR: false,
  ADD_ATTR: ["target"],
  FORBID_TAGS: [
    "style", "form", "button", "textarea", "select", "option", "iframe", "frame", "frameset",
    "object", "embed", "link", "meta", "base", "svg", "math", "video", "audio", "source",
    "track", "picture", "canvas", "template", "dialog", "details", "summary",
  ],
  FORBID_ATTR: ["style", "id", "name", "srcset", "action", "formaction", "background", "poster", "ping"],
};

export function isAllowedImageSource(src) {
  if (!src) return false;
  if (SAFE_DATA_IMAGE.test(src)) return true;
  try {
    const url = new URL(src, window.location.href);
    return url.origin === window.location.origin && (url.protocol === "http:" || url.protocol === "https:");
  } catch {
    return false;
  }
}

purifier.addHook("uponSanitizeAttribute", (node, data) => {
  if (data.attrName === "class") {
    // Only marked's own `language-xxx` on code blocks; nothing may borrow the page's classes.
    data.keepAttr = node.nodeName === "CODE" && CODE_CLASS.test(data.attrValue);
  }
});

purifier.addHook("afterSanitizeAttributes", (node) => {
  switch (node.nodeName) {
    case "A":
      if (node.hasAttribute("href")) {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer");
      } else {
        node.removeAttribute("target");
      }
      break;
    case "IMG": {
      const src = node.getAttribute("src") || "";
      if (!isAllowedImageSource(src)) {
        node.removeAttribute("src");
        node.setAttribute("data-blocked-src", src.slice(0, 200));
      }
      node.setAttribute("loading", "lazy");
      node.setAttribute("referrerpolicy", "no-referrer");
      break;
    }
    case "INPUT":
      // GFM task lists: a read-only checkbox is the only input kept.
      for (const attr of [...node.attributes]) {
        if (attr.name !== "checked") node.removeAttribute(attr.name);
      }
      node.setAttribute("type", "checkbox");
      node.setAttribute("disabled", "");
      break;
    default:
      if (node.hasAttribute && node.hasAttribute("target")) node.removeAttribute("target");
  }
});

// Highlighting is the costly part of a re-render while code streams in: finished blocks
// come back unchanged frame after frame, so their highlighted HTML is remembered.
const highlightCache = new Map();
const HIGHLIGHT_CACHE_SIZE = 200;
const HIGHLIGHT_MAX_CHARS = 100_000;

function highlight(code, language) {
  const key = `${language}\u0000${code}`;
  const cached = highlightCache.get(key);
  if (cached !== undefined) return cached;
  let html = null;
  if (language && code.length <= HIGHLIGHT_MAX_CHARS && hljs.getLanguage(language)) {
    try {
      html = hljs.highlight(code, { language, ignoreIllegals: true }).value;
    } catch {
      html = null;
    }
  }
  if (highlightCache.size >= HIGHLIGHT_CACHE_SIZE) highlightCache.delete(highlightCache.keys().next().value);
  highlightCache.set(key, html);
  return html;
}

function enhanceCodeBlock(pre) {
  const code = pre.querySelector("code");
  if (!code) return;
  const match = (code.getAttribute("class") || "").match(/language-([\w+#.-]+)/);
  const language = match ? match[1].toLowerCase() : "";
  const text = code.textContent;
  const highlighted = highlight(text, language);
  if (highlighted !== null) {
    code.innerHTML = highlighted; // highlight.js escapes the code it wraps in its spans
    code.classList.add("hljs");
  }
  const wrapper = document.createElement("div");
  wrapper.className = "code-block";
  const bar = document.createElement("div");
  bar.className = "code-bar";
  const label = document.createElement("span");
  label.className = "code-lang";
  label.textContent = language || t("code");
  const copy = document.createElement("button");
  copy.type = "button";
  copy.className = "copy-btn";
  copy.dataset.action = "copy-code";
  copy.textContent = t("Copy");
  copy.setAttribute("aria-label", t("Copy code"));
  bar.append(label, copy);
  pre.tabIndex = 0; // a long line scrolls it sideways: by keyboard too
  pre.replaceWith(wrapper);
  wrapper.append(bar, pre);
}

function replaceBlockedImage(img) {
  const span = document.createElement("span");
  span.className = "blocked-media";
  const alt = img.getAttribute("alt");
  span.textContent = alt ? t("Image not loaded: %s").replace("%s", alt) : t("Image not loaded");
  span.title = img.getAttribute("data-blocked-src") || "";
  img.replaceWith(span);
}

/** Markdown source -> a sanitised DocumentFragment ready to insert. */
export function renderMarkdown(source) {
  const html = marked.parse(source || "");
  const fragment = purifier.sanitize(html, SANITIZE_CONFIG);
  for (const img of fragment.querySelectorAll("img[data-blocked-src]")) replaceBlockedImage(img);
  // A link whose URL was refused is no link: its text stays, plain, with nothing to click.
  for (const link of fragment.querySelectorAll("a:not([href])")) link.replaceWith(...link.childNodes);
  for (const pre of fragment.querySelectorAll("pre")) enhanceCodeBlock(pre);
  for (const table of fragment.querySelectorAll("table")) {
    const wrap = document.createElement("div");
    wrap.className = "table-wrap";
    wrap.tabIndex = 0; // a wide table scrolls sideways: by keyboard too
    table.replaceWith(wrap);
    wrap.append(table);
  }
  return fragment;
}

/** Copies text, falling back to a selection for pages outside a secure context. */
export async function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      // fall through to the selection fallback
    }
  }
  const area = document.createElement("textarea");
  area.value = text;
  area.setAttribute("readonly", "");
  area.className = "offscreen";
  document.body.append(area);
  area.select();
  let ok = false;
  try {
    ok = document.execCommand("copy");
  } catch {
    ok = false;
  }
  area.remove();
  return ok;
}

/** The code blocks' copy buttons under `root`, handled by delegation: answers are re-rendered while they stream. */
export function handleCopyButtons(root) {
  root.addEventListener("click", async (event) => {
    const button = event.target.closest("[data-action=copy-code]");
    if (!button) return;
    const code = button.closest(".code-block")?.querySelector("pre code");
    if (!code) return;
    const ok = await copyText(code.textContent);
    button.textContent = ok ? t("Copied") : t("Copy failed");
    button.classList.toggle("copied", ok);
    setTimeout(() => {
      if (button.isConnected) {
        button.textContent = t("Copy");
        button.classList.remove("copied");
      }
    }, 1500);
  });
}
