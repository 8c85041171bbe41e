// The shared page (/s/<token>/, docs/protocol.md, "Shared links"): a read-only snapshot drawn
// by the chat page's own timeline (timeline.js: tool rows, thinking, Markdown rendered safely):
// the one branch the owner was looking at, so every turn has one version. It reads the
// snapshot from the link's own events URL and nothing else: no socket, no /api/, no files
// (attachments are listed by name).
import { CompactionRow, turnCompletedAt } from "./compaction-row.js";
import { ChildRuns } from "./child-run.js";
import { h } from "./dom.js";
import { handleCopyButtons } from "./markdown.js";
import { mountInSlices } from "./slices.js";
import { Turn } from "./timeline.js";
import { VersionTree } from "./versions.js";
import { t, tf } from "./i18n.js";

const main = document.getElementById("main");
const container = document.getElementById("turns");
const loading = document.getElementById("loading-state");
const notice = document.getElementById("notice");
const tree = new VersionTree();
const order = [];

function say(text) {
  document.getElementById("notice-text").textContent = text;
  notice.hidden = false;
}
document.getElementById("notice-close").addEventListener("click", () => {
  notice.hidden = true;
});

// What a turn may do here: switch the versions it shows; nothing that writes or opens files.
const actions = {
  readOnly: true,
  showVersion: (turn, step, kind) => {
    if (!tree.step(turn, step, kind)) return;
    const hadFocus = Boolean(turn.el && turn.el.contains(document.activeElement));
    tree.layout(order);
    const shown = tree.bySeq.get(tree.target);
    if (hadFocus && shown) (kind === "answer" ? shown.answerVersionSwitcher : shown.questionVersions).focus(step);
  },
  edit: () => false,
  regenerate: () => false,
  continueAnswer: () => false,
  approve: () => false,
  connection: () => "closed",
  fileUrl: () => null,
};

function ingest(frames) {
  const turns = new Map();
  const children = new ChildRuns(turns, actions); // sub-agents' runs, inside their calls' cards
  const steerTurns = new Map(); // queueId -> the turn a steer was sent to
  for (const frame of frames) {
    if (typeof frame.seq !== "number") continue;
    if (frame.runId === null) {
      // The conversation's own events (docs/protocol.md, "Queued messages"): here only a steer
      // left unread matters, its turn says so.
      const left = frame.type === "unqueued" ? frame.reason : frame.type === "queued" && frame.steered ? "waiting" : null;
      if (left) steerTurns.get(frame.queueId)?.steerLeft(frame.queueId, left);
      continue;
    }
    if (frame.type === "compaction") {
      turnCompletedAt(order, frame.throughSeq)?.addCompaction(new CompactionRow(frame));
      continue;
    }
    if (children.apply(frame, false)) continue;
    const runId = frame.runId || "unknown";
    let turn = turns.get(runId);
    if (!turn && frame.type !== "user_message") continue; // a compaction run is no turn
    if (!turn) {
      turn = new Turn(runId, actions);
      turns.set(runId, turn);
      order.push(turn);
      if (frame.type === "user_message") tree.place(turn, frame);
    }
    if (frame.type === "steer") steerTurns.set(frame.queueId, turn);
    turn.apply(frame, false);
  }
  tree.layout(order);
}

async function load() {
  let data;
  try {
    const response = await fetch(main.dataset.eventsUrl, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    if (!response.ok) throw new Error(response.status === 404 ? t("This link is no longer shared.") : response.statusText);
    data = await response.json();
  } catch (error) {
    loading.hidden = true;
    say(tf("Could not load the conversation: %s", [error.message]));
    return;
  }
  ingest(Array.isArray(data.events) ? data.events : []);
  await mountInSlices(order, container, { newestDrawn: () => {}, olderDrawn: () => {}, closed: () => false });
  loading.hidden = true;
  if (order.length === 0) container.append(h("p", { className: "shared-empty", text: t("Nothing was shared.") }));
}

function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.content : "";
}

const copy = document.getElementById("copy-shared"); // signed-in visitors only
if (copy) {
  copy.addEventListener("click", async () => {
    copy.disabled = true;
    try {
      const response = await fetch(main.dataset.copyUrl, {
        method: "POST",
        headers: { Accept: "application/json", "X-CSRFToken": csrfToken() },
        credentials: "same-origin",
      });
      const data = await response.json().catch(() => ({}));
      if (response.status !== 201) throw new Error(data.message || response.statusText);
      window.location.assign(`/?c=${encodeURIComponent(data.id)}`);
    } catch (error) {
      copy.disabled = false;
      say(tf("Could not copy: %s", [error.message]));
    }
  });
}

handleCopyButtons(container);
load();
