// The connection indicator in the header (and the page's data-connection): live, connecting,
// reconnecting in n seconds with "Retry now", or disconnected; hidden while no conversation
// is open. Drawn from the conversation state's facts about the open conversation's socket.
import { t, tf } from "./i18n.js";

const app = document.getElementById("app");
const indicator = document.getElementById("connection-status");
const label = document.getElementById("connection-text");
const retryNow = document.getElementById("retry-now");

let countdownTimer = null;

function modeOf(state) {
  const facts = state.facts;
  if (!state.view || !facts) return "idle";
  if (state.live) return "live";
  if (facts.connection === "waiting") return "waiting";
  if (facts.connection === "closed") return "offline";
  return "connecting";
}

function labelOf(mode, retryAt) {
  if (mode === "live") return t("Live");
  if (mode === "connecting") return t("Connecting…");
  if (mode === "offline") return t("Disconnected");
  if (mode === "waiting") {
    const seconds = Math.max(0, Math.ceil((retryAt - Date.now()) / 1000));
    return seconds > 0 ? tf("Connection lost. Reconnecting in %s s…", [seconds]) : t("Reconnecting…");
  }
  return "";
}

function render(state) {
  clearInterval(countdownTimer);
  const mode = modeOf(state);
  const retryAt = state.facts ? state.facts.retryAt : 0;
  const draw = () => {
    label.textContent = labelOf(mode, retryAt);
  };
  draw();
  if (mode === "waiting") countdownTimer = setInterval(draw, 500); // the countdown
  indicator.dataset.mode = mode;
  indicator.hidden = mode === "idle";
  retryNow.hidden = mode !== "waiting";
  app.dataset.connection = mode;
}

/** Keeps the indicator in step with `state` (a ConversationState). */
export function showConnection(state) {
  state.addEventListener("change", () => render(state));
  retryNow.addEventListener("click", () => state.view && state.view.reconnectNow());
}
