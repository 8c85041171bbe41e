// The versions of a conversation's turns, derived from the user_messages alone, the same way in
// every tab and after every reconnect (chat/eventlog/versions.py reads them by the same rule for the
// export): each turn follows the turn of its `parentSeq` (an old user_message without one
// follows the one before it); turns with the same parent are versions of one another, in seq
// order. As in ChatGPT, an edit makes a version of the *question* (switched under the user's
// message) and a regenerate a version of the *answer* to the question it repeats (switched
// under the answer): a turn is question i of n among its siblings' questions and answer j of m
// among its question's answers. Every turn stays in the DOM in seq order and the ones off the
// branch being viewed are hidden. The viewed branch runs through `target` (the newest turn, the
// version the user switched to, or the one kept on the server for them) and below it through
// the newest turns; a new turn becomes the target, and a message sent continues the branch
// being viewed (conversation.js). Both readers are held to one statement of the shape,
// tests/eventlog/version_trees.json.

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
    // A regenerate of a sibling answers that sibling's question again.
    const repeated = this.bySeq.get(frame.regenerates);
    turn.question = repeated && repeated.parentSeq === parent ? repeated.question : turn;
    this.lastUserSeq = frame.seq;
    this.bySeq.set(frame.seq, turn);
    if (!this.children.has(parent)) this.children.set(parent, []);
    this.children.get(parent).push(turn);
    for (let up = this.bySeq.get(parent); up; up = this.bySeq.get(up.parentSeq)) up.newest = frame.seq;
    this.target = frame.seq;
    this.changed = true;
  }

  /** Views the branch through the turn of `seq` (a choice kept for the user); false when the
   * conversation has no such turn. */
  view(seq) {
    if (!this.bySeq.has(seq)) return false;
    this.target = seq;
    this.changed = true;
    return true;
  }

  /** Shows the branch through `target`, hides the others, and tells each of `turns` (all of
   * the conversation's, in seq order) its versions. */
  layout(turns) {
    this.changed = false;
    const shown = new Set();
    let turn = this.bySeq.get(this.target);
    for (let up = turn; up; up = this.bySeq.get(up.parentSeq)) shown.add(up);
    while (turn) {
      const below = this.children.get(turn.seq);
      turn = below ? newestOf(below) : null;
      if (turn) shown.add(turn);
    }
    for (const each of turns) {
      if (each.seq === null) {
        // No user_message: outside the tree.
        each.place({ shown: true, version: 1, versions: 1, answerVersion: 1, answerVersions: 1 });
        continue;
      }
      const questions = this.questionsOf(each);
      const answers = this.answersOf(each);
      if (shown.has(each)) each.question.viewedAnswer = each;
      each.place({
        shown: shown.has(each),
        version: questions.indexOf(each.question) + 1,
        versions: questions.length,
        answerVersion: answers.indexOf(each) + 1,
        answerVersions: answers.length,
      });
    }
  }

  /** The questions that follow the same turn as `turn` (each its first turn), in seq order. */
  questionsOf(turn) {
    return [...new Set(this.children.get(turn.parentSeq).map((each) => each.question))];
  }

  /** The answers to `turn`'s question (their turns), in seq order. */
  answersOf(turn) {
    return this.children.get(turn.parentSeq).filter((each) => each.question === turn.question);
  }

  /** Makes the previous (-1) or next (+1) version of a turn's question (kind "question": the
   * answer to it last shown, or else its most recently continued one) or of its answer (kind
   * "answer") the target; false when there is none. */
  step(turn, step, kind = "question") {
    let other;
    if (kind === "answer") {
      const answers = this.answersOf(turn);
      other = answers[answers.indexOf(turn) + step];
    } else {
      const questions = this.questionsOf(turn);
      const question = questions[questions.indexOf(turn.question) + step];
      other = question && (question.viewedAnswer || newestOf(this.answersOf(question)));
    }
    if (!other) return false;
    this.target = other.seq;
    return true;
  }
}

/** Of sibling turns, the one whose subtree holds the newest turn. */
function newestOf(turns) {
  return turns.reduce((a, b) => (b.newest > a.newest ? b : a));
}
