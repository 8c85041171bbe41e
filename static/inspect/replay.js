// The run inspector's replay (templates/inspect/run.html): the run's stored events applied to
// the chat page's own Turn (static/chat/timeline.js), so staff see the run as its user saw it.
// The events come in a JSON data block (json_script: escaped, and not script under the CSP);
// the Turn renders model output through the same sanitising Markdown path as the chat page.
import { Turn } from "../chat/timeline.js";

const data = document.getElementById("replay-events");
const target = document.getElementById("replay");
if (data && target) {
  const events = JSON.parse(data.textContent);
  const turn = new Turn(target.dataset.runId);
  for (const frame of events) turn.apply(frame, false);
  target.replaceChildren(turn.mount());
  target.dataset.replayed = String(events.length);
}
