// The user's own usage under their name in the sidebar: tokens today and this month, and the
// daily quota when the server sets one; and, above the composer, a notice once a budget the
// user is held to is 80% used, then used up (docs/protocol.md, "Usage" and "Budgets"). Read
// from /api/usage/ at load and after each run.
import { api } from "./api.js";
import { t, tf } from "./i18n.js";

const NOTICE_AT = 0.8;
const PERIODS = { day: () => t("day"), week: () => t("week"), month: () => t("month") };

export async function refreshUsage(el, note) {
  let usage;
  try {
    usage = await api.usage();
  } catch {
    return; // a passing failure: the lines keep what they said
  }
  const today = usage.today.totalTokens.toLocaleString();
  const month = usage.month.totalTokens.toLocaleString();
  el.textContent = usage.dailyTokenQuota
    ? tf("%s of %s tokens today · %s this month", [today, usage.dailyTokenQuota.toLocaleString(), month])
    : tf("%s tokens today · %s this month", [today, month]);
  el.hidden = false;
  if (note) showBudgetNotice(note, usage.budgets || []);
}

/** The fullest of the budgets: used up first, else the one past 80% that is nearest its limit. */
function showBudgetNotice(note, budgets) {
  const fill = (b) => (Number(b.limit) > 0 ? (Number(b.used) || 0) / Number(b.limit) : 0);
  const fullest = budgets.filter((b) => b.exhausted || fill(b) >= NOTICE_AT).sort((a, b) => fill(b) - fill(a))[0];
  if (!fullest) {
    note.hidden = true;
    return;
  }
  const period = (PERIODS[fullest.period] || PERIODS.day)();
  if (fullest.exhausted || fill(fullest) >= 1) {
    const lang = document.documentElement.lang || undefined;
    const resets = new Date(fullest.resetsAt).toLocaleString(lang, { dateStyle: "medium", timeStyle: "short" });
    note.textContent = tf("Your budget for this %s is used up; new messages are refused until %s.", [period, resets]);
    note.dataset.level = "exhausted";
  } else {
    note.textContent = tf("You have used %s of your budget for this %s.", [`${Math.floor(fill(fullest) * 100)}%`, period]);
    note.dataset.level = "near";
  }
  note.hidden = false;
}
