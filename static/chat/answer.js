// A turn's answer: its Markdown re-rendered at most once per animation frame, however many
// text deltas arrive (a live answer is drawn at an even pace across each frame's window,
// pacing.js), and its buttons: the answer's versions ‹ n / m › (made by regenerates), copy
// the answer, regenerate. Functions of a Turn (timeline.js), which keeps the answer's text and
// its elements.
import { h } from "./dom.js";
import { copyText, renderMarkdown } from "./markdown.js";
import { t } from "./i18n.js";
import { versionSwitcher } from "./switcher.js";

// --- markdown re-rendering, batched per animation frame ---------------------------------
const dirtyTurns = new Set();
let frameRequested = false;
let afterRenderHook = null;

export function onAfterRender(hook) {
  afterRenderHook = hook;
}

export function scheduleAnswer(turn) {
  dirtyTurns.add(turn);
  if (frameRequested) return;
  frameRequested = true;
  requestAnimationFrame((now) => {
    frameRequested = false;
    const turns = [...dirtyTurns];
    dirtyTurns.clear();
    for (const each of turns) {
      renderAnswer(each, now);
      if (each.pace.active) scheduleAnswer(each); // more to reveal at the next frame
    }
    if (afterRenderHook) afterRenderHook();
  });
}

export function renderAnswer(turn, now = performance.now()) {
  if (!turn.el) return;
  const streaming = turn.running && turn.text.length > 0;
  turn.answer.classList.toggle("streaming", streaming);
  // Not a live region: it changes with every frame. A screen reader hears the finished answer
  // once, from the page's polite status (spokenAnswer), and is told meanwhile that it is in flux.
  turn.answer.setAttribute("aria-busy", String(turn.running));
  const text = turn.pace.visible(turn.text, now);
  if (turn.renderedText === text) return;
  turn.renderedText = text;
  turn.answer.replaceChildren(renderMarkdown(text));
  turn.answer.hidden = text.length === 0;
}

/** The answer as a screen reader is told it once the run has ended: the rendered Markdown's
 * words, without the code blocks' language labels and buttons. */
export function spokenAnswer(turn) {
  const rendered = renderMarkdown(turn.text);
  for (const bar of rendered.querySelectorAll(".code-bar")) bar.remove();
  return rendered.textContent.replace(/\s+/g, " ").trim();
}

// --- the answer's buttons ------------------------------------------------------------------
export function mountAnswerActions(turn) {
  const copy = h("button", { type: "button", className: "turn-action", dataset: { action: "copy-answer" }, title: t("Copy the answer as Markdown"), text: t("Copy") });
  copy.addEventListener("click", async () => {
    const ok = await copyText(turn.answerText);
    copy.textContent = ok ? t("Copied") : t("Copy failed");
    setTimeout(() => {
      if (copy.isConnected) copy.textContent = t("Copy");
    }, 1500);
  });
  const regenerate = h("button", { type: "button", className: "turn-action", dataset: { action: "regenerate" }, title: t("Answer this message again"), text: t("Regenerate") });
  regenerate.addEventListener("click", () => turn.actions?.regenerate(turn));
  regenerate.hidden = Boolean(turn.actions?.readOnly); // a shared snapshot is only read
  // Regenerated answers are versions of the answer, switched here (the question stays).
  turn.answerVersionSwitcher = versionSwitcher(
    { group: t("Versions of this answer"), previous: t("Previous answer"), next: t("Next answer") },
    "answer",
    (step) => turn.actions?.showVersion(turn, step, "answer"),
  );
  turn.answerActions = h("div", { className: "answer-actions" }, turn.answerVersionSwitcher.el, copy, regenerate);
  return turn.answerActions;
}

export function updateAnswerVersions(turn) {
  turn.answerVersionSwitcher.update(turn.answerVersion, turn.answerVersions);
}

// --- an answer cut off by the token limit (complete's finishReason "length") ---------------
export function mountCutNote(turn) {
  const more = h("button", { type: "button", className: "turn-action", dataset: { action: "continue" }, title: t("Continue the answer where it was cut off"), text: t("Continue") });
  more.addEventListener("click", () => turn.actions?.continueAnswer(turn));
  more.hidden = Boolean(turn.actions?.readOnly);
  turn.cutNote = h("div", { className: "turn-cut", role: "note" }, h("span", { text: t("Cut off by the token limit.") }), more);
  turn.cutNote.hidden = turn.finishReason !== "length";
  return turn.cutNote;
}

export function updateCutNote(turn) {
  if (turn.cutNote) turn.cutNote.hidden = turn.finishReason !== "length";
}
