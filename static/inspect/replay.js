// The run inspector's replay (templates/inspect/run.html): the run's stored events applied to
// the chat page's own Turn (static/chat/timeline.js), so staff see the run as its user saw it,
// its sub-agents' runs nested in their calls (static/chat/child-run.js).
// The events come in a JSON data block (json_script: escaped, and not script under the CSP);
// the Turn renders model output through the same sanitising Markdown path as the chat page.
import { ChildRuns } from "../chat/child-run.js";
import { Turn } from "../chat/timeline.js";

// A replay is read, not acted on: no thumbs (staff do not rate another user's answer, and the
// rating endpoint is its owner's), no edit, regenerate, continue or approval.
const READ_ONLY = {
  readOnly: true,
  showVersion: () => {},
  edit: () => false,
  regenerate: () => false,
  continueAnswer: () => false,
  approve: () => false,
  connection: () => "closed",
  fileUrl: () => null,
};

const data = document.getElementById("replay-events");
const target = document.getElementById("replay");
if (data && target) {
  const events = JSON.parse(data.textContent);
  const turn = new Turn(target.dataset.runId, READ_ONLY);
  // The events of its sub-agents' runs (its descendants, in the log's order) nest in its calls.
  const children = new ChildRuns(new Map([[turn.runId, turn]]), READ_ONLY);
  for (const frame of events) {
    if (!children.apply(frame, false)) turn.apply(frame, false);
  }
  target.replaceChildren(turn.mount());
  target.dataset.replayed = String(events.length);
}
