// The sidebar's date groups, as ChatGPT's: Today, Yesterday, Previous 7 days, Previous 30 days,
// then one group per month, by the day a conversation was last active in the browser's own
// time zone (the user's), not the server's UTC.
import { t } from "./i18n.js";

const DAY_MS = 86400000;

function startOfDay(moment) {
  return new Date(moment.getFullYear(), moment.getMonth(), moment.getDate());
}

/** {key, label} of the group a conversation last active at `stamp` (ISO text) belongs to. */
export function dateGroup(stamp, now = new Date()) {
  const moment = new Date(stamp);
  if (Number.isNaN(moment.getTime())) return { key: "today", label: t("Today") };
  // Rounded: a day with a daylight-saving change is 23 or 25 hours long.
  const days = Math.round((startOfDay(now) - startOfDay(moment)) / DAY_MS);
  if (days <= 0) return { key: "today", label: t("Today") };
  if (days === 1) return { key: "yesterday", label: t("Yesterday") };
  if (days <= 7) return { key: "week", label: t("Previous 7 days") };
  if (days <= 30) return { key: "month", label: t("Previous 30 days") };
  const sameYear = moment.getFullYear() === now.getFullYear();
  const format = new Intl.DateTimeFormat(document.documentElement.lang || undefined,
    sameYear ? { month: "long" } : { month: "long", year: "numeric" });
  return { key: `${moment.getFullYear()}-${moment.getMonth()}`, label: format.format(moment) };
}
