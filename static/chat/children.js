// Child runs (docs/protocol.md, "Sub-agents"): the events of a run that a delegate tool call
// started carry parentRunId and parentToolCallId. They are no turn of their own: each is drawn
// inside the card of the call that started it (a grandchild's inside its parent's host card),
// and an approval a child asks for is shown in the turn, where the user answers it.

export class ChildRuns {
  /** `turns`: the page's Map of runId -> Turn (top-level runs). */
  constructor(turns) {
    this.turns = turns;
    this.hosts = new Map(); // child runId -> {turn, item}
  }

  /** Draws a child run's frame where it belongs; false for a top-level run's frame. */
  route(frame, live) {
    if (typeof frame.parentRunId !== "string") return false;
    const host = this.hostOf(frame);
    if (!host) return true; // its parent's events are not loaded: nothing to draw it in
    if (frame.type === "approval_request" || frame.type === "approval_result") host.turn.apply(frame, live);
    host.item?.addChild(frame);
    return true;
  }

  hostOf(frame) {
    let host = this.hosts.get(frame.runId);
    if (!host) {
      const turn = this.turns.get(frame.parentRunId);
      host = turn ? { turn, item: turn.tools.get(frame.parentToolCallId) } : this.hosts.get(frame.parentRunId);
      if (host) this.hosts.set(frame.runId, host);
    }
    return host;
  }
}
