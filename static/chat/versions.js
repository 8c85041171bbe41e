// The versions of a conversation's turns (edits, regenerated answers), derived from the
// user_messages alone, the same way in every tab and after every reconnect: each turn follows
// the turn of its `parentSeq` (an old user_message without one follows the one before it);
// turns with the same parent are versions of one another, in seq order. Every turn stays in the
// DOM in seq order and the ones off the branch being viewed are hidden. The viewed branch runs
// through `target` (the newest turn, or the version the user switched to) and below it through
// the newest turns; a new turn becomes the target, and a message sent continues the branch
// being viewed (conversation.js).

export class VersionTree {
  constructor() {
    // user_message seq -> turn, parent seq (0 for the first turns) -> its turns.
    this.bySeq = new Map();
    this.children = new Map();
    this.lastUserSeq = null;
    this.target = null;
    this.changed = false;
  }

  /** A new turn's place in the version tree; it becomes the one viewed. */
  place(turn, frame) {
    let parent = Object.hasOwn(frame, "parentSeq") ? frame.parentSeq : this.lastUserSeq;
    // A parent that is not an earlier turn (a damaged log): a first turn, as the server reads it.
    if (!Number.isInteger(parent) || parent >= frame.seq || !this.bySeq.has(parent)) parent = 0;
    turn.seq = frame.seq;
    turn.parentSeq = parent;
    turn.newest = frame.seq; // the newest seq in its subtree
    this.lastUserSeq = frame.seq;
    this.bySeq.set(frame.seq, turn);
    if (!this.children.has(parent)) this.children.set(parent, []);
    this.children.get(parent).push(turn);
    for (let up = this.bySeq.get(parent); up; up = this.bySeq.get(up.parentSeq)) up.newest = frame.seq;
    this.target = frame.seq;
    this.changed = true;
  }

  /** Shows the branch through `target`, hides the others, and tells each of `turns` (all of
   * the conversation's, in seq order) its version. */
  layout(turns) {
    this.changed = false;
    const shown = new Set();
    let turn = this.bySeq.get(this.target);
    for (let up = turn; up; up = this.bySeq.get(up.parentSeq)) shown.add(up);
    while (turn) {
      const below = this.children.get(turn.seq);
      turn = below ? below.reduce((a, b) => (b.newest > a.newest ? b : a)) : null;
      if (turn) shown.add(turn);
    }
    for (const each of turns) {
      if (each.seq === null) {
        each.place({ shown: true, version: 1, versions: 1 }); // no user_message: outside the tree
        continue;
      }
      const versions = this.children.get(each.parentSeq);
      each.place({ shown: shown.has(each), version: versions.indexOf(each) + 1, versions: versions.length });
    }
  }

  /** Makes a turn's previous (-1) or next (+1) version the target; false when there is none. */
  step(turn, step) {
    const versions = this.children.get(turn.parentSeq) || [];
    const other = versions[versions.indexOf(turn) + step];
    if (!other) return false;
    this.target = other.seq;
    return true;
  }
}
