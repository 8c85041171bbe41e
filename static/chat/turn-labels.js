// The words that sum a turn up: its timeline summary (icon, label, counts) while it runs and
// after it ends, the status line under a run that did not succeed, and the footer with its
// time and tokens. Reads a Turn, draws nothing.
import { t, tf } from "./i18n.js";

/** The summary line of a turn's timeline: its state (the icon's kind), the label and the counts. */
export function turnSummary(turn) {
  const tools = turn.items.filter((i) => i.kind === "tool");
  const errors = turn.items.filter((i) => i.kind === "error" && !i.isCancel && !i.isWarning);
  const thought = turn.items.some((i) => i.kind === "thinking");
  const state = turn.running
    ? "running"
    : turn.hasError
      ? "error"
      : turn.status === "cancelled"
        ? "stopped"
        : turn.retries
          ? "recovered"
          : "done";
  const counts = [];
  if (tools.length) counts.push(tools.length === 1 ? t("1 tool call") : tf("%s tool calls", [tools.length]));
  // Each fact once: "Recovered after 1 retry" has said how many retries there were.
  if (turn.retries && state !== "recovered") counts.push(turn.retries === 1 ? t("1 retry") : tf("%s retries", [turn.retries]));
  if (errors.length) counts.push(errors.length === 1 ? t("1 error") : tf("%s errors", [errors.length]));
  return {
    state,
    icon: { recovered: "warn" }[state] || state,
    label: turn.running ? runningLabel(turn) : finishedLabel(turn, thought || tools.length > 0),
    counts: counts.length ? ` · ${counts.join(" · ")}` : "",
  };
}

/** What the agent is doing right now, from the last step and whether the answer has begun. */
function runningLabel(turn) {
  const last = turn.items[turn.items.length - 1];
  if (turn.items.some((i) => i.kind === "approval" && i.pending)) return t("Waiting for your approval…");
  if (last && last.kind === "tool" && last.status === "running") return tf("Running %s…", [last.name]);
  if (turn.text) return t("Writing the answer…");
  if (last && last.kind === "thinking") return t("Thinking…");
  if (last && last.kind === "error") return t("Retrying…");
  return t("Working…");
}

function finishedLabel(turn, hasSteps) {
  if (turn.hasError) return t("Finished with errors");
  // A stopped run's "Stopped." is the status line's: the summary names what is folded in it.
  if (turn.status !== "cancelled" && turn.retries) {
    return turn.retries === 1 ? t("Recovered after 1 retry") : tf("Recovered after %s retries", [turn.retries]);
  }
  return hasSteps ? t("Thought process") : t("Done");
}

/** The line under a finished run that did not succeed; "" for one that did or still runs. */
export function statusMessage(status) {
  const messages = {
    cancelled: t("Stopped."),
    failed: t("The run failed."),
    interrupted: t("Interrupted: the server stopped during this run."),
  };
  return Object.hasOwn(messages, status) ? messages[status] : "";
}

/** "12.3 s · 1,234 tokens" from complete's durationMs and usage; "" while running, or for a run
 * stored before complete carried them. Numbers in the page's language. */
export function turnFooter(turn) {
  const stats = turn.stats;
  if (turn.running || !stats || typeof stats.durationMs !== "number") return "";
  const lang = document.documentElement.lang || undefined;
  const seconds = new Intl.NumberFormat(lang, { minimumFractionDigits: 1, maximumFractionDigits: 1 })
    .format(stats.durationMs / 1000);
  const parts = [tf("%s s", [seconds])];
  const tokens = stats.usage && Number(stats.usage.totalTokens);
  if (tokens > 0) {
    const count = new Intl.NumberFormat(lang).format(tokens);
    parts.push(tokens === 1 ? t("1 token") : tf("%s tokens", [count]));
  }
  return parts.join(" · ");
}

/** The name an agent is shown by. The default agent (the server's own configuration) is named
 * "Default" by the API and in the events, in English for every client: it is shown in the
 * page's language. */
export function agentName(slug, name) {
  return slug === "default" ? t("Default") : name;
}
