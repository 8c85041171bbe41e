// A compaction (docs/protocol.md, "Compaction"): the older turns of a branch summarized by the
// agent's model. Drawn as a folded row after the newest turn it summarized, opening to the
// summary: on every branch that holds that turn, since the summary stands for the turns above
// it in the model's memory of each of them. The summary is model output: shown as plain text.
import { h } from "./dom.js";
import { t, tf } from "./i18n.js";

export class CompactionRow {
  constructor(frame) {
    this.seq = frame.seq;
    this.summary = String(frame.summary ?? "");
    this.turns = Number.isInteger(frame.turns) ? frame.turns : 0;
    this.el = null;
  }

  mount() {
    const count = this.turns === 1 ? t("1 turn") : tf("%s turns", [this.turns]);
    this.el = h(
      "details",
      { className: "compaction-row", dataset: { seq: String(this.seq) } },
      h("summary", {}, h("span", { className: "compaction-label", text: t("Earlier conversation summarized") }),
        h("span", { className: "compaction-count", text: ` · ${count}` })),
      h("div", { className: "compaction-summary", text: this.summary }),
    );
    return this.el;
  }
}

/** The turn whose run's `complete` is at `seq`, among the turns drawn; null when none is. */
export function turnCompletedAt(turns, seq) {
  return turns.find((turn) => turn.completeSeq === seq) ?? null;
}
