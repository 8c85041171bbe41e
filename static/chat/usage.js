// The user's own usage under their name in the sidebar: tokens today and this month (UTC), and
// the daily quota when the server sets one. Read from /api/usage/ at load and after each run.
import { api } from "./api.js";
import { tf } from "./i18n.js";

export async function refreshUsage(el) {
  let usage;
  try {
    usage = await api.usage();
  } catch {
    return; // a passing failure: the line keeps what it said
  }
  const today = usage.today.totalTokens.toLocaleString();
  const month = usage.month.totalTokens.toLocaleString();
  el.textContent = usage.dailyTokenQuota
    ? tf("%s of %s tokens today · %s this month", [today, usage.dailyTokenQuota.toLocaleString(), month])
    : tf("%s tokens today · %s this month", [today, month]);
  el.hidden = false;
}
