// A live answer drawn at an even pace. The server stores a stream's text in windows that grow
// to about half a second (fewer rows per token); drawn as it arrives, each frame would show as
// a jump after a pause. A Pace reveals a frame's text across the time the next frame is expected
// to take, so the text flows at the model's own rate, about one window behind it. The windows
// grow along a stream (doubling, up to a limit), so the next interval is predicted as the last
// one times the last growth (at most 2x, never shorter than the last): revealing over the last
// interval alone would finish early and pause for the rest of each longer window. The first
// text of a stream shows at once; history and a finished run are not paced.

// A longer pause than this is a new stream (after a tool call, a lost socket): shown at once.
const NEW_STREAM_MS = 1000;
const SHORTEST_MS = 16; // one display frame

export class Pace {
  constructor() {
    this.shown = null; // characters shown while pacing; null: all of the text
    this.rate = 0; // characters per millisecond
    this.lastAt = null; // when the last live text frame came
    this.lastInterval = null; // and how long it took to come
    this.steppedAt = 0;
  }

  get active() {
    return this.shown !== null;
  }

  /** A live text frame made the text grow from `before` to `after` characters at `now`. */
  arrived(before, after, now) {
    const interval = this.lastAt === null ? Infinity : now - this.lastAt;
    this.lastAt = now;
    if (interval > NEW_STREAM_MS) {
      this.reset();
      this.lastInterval = null;
      return;
    }
    const growth = this.lastInterval ? Math.min(2, Math.max(1, interval / this.lastInterval)) : 1;
    this.lastInterval = interval;
    if (this.shown === null) {
      this.shown = before;
      this.steppedAt = now;
    } else {
      this.advance(now);
    }
    this.rate = (after - this.shown) / Math.max(interval * growth, SHORTEST_MS);
  }

  /** Shows everything from now on (the run ended, or its text was rewritten). */
  reset() {
    this.shown = null;
  }

  advance(now) {
    if (this.shown === null) return;
    this.shown += this.rate * Math.max(0, now - this.steppedAt);
    this.steppedAt = now;
  }

  /** The part of `text` to draw at `now`. */
  visible(text, now) {
    this.advance(now);
    if (this.shown === null || this.shown >= text.length) {
      this.shown = null;
      return text;
    }
    let end = Math.floor(this.shown);
    const code = text.charCodeAt(end - 1);
    if (code >= 0xd800 && code <= 0xdbff) end -= 1; // never half of a surrogate pair
    return text.slice(0, end);
  }
}
