// Many turns drawn without freezing the page: the newest first, older ones above them in
// slices of about one frame's work, yielding between slices.

const MIN_BATCH_TURNS = 4;
const SLICE_MS = 12;

/** Draws the turns of `order` (in seq order) into `container`: newestDrawn() once the first
 * slice is in, olderDrawn() after each older one; stops when closed(). */
export async function mountInSlices(order, container, { newestDrawn, olderDrawn, closed }) {
  const turns = order.slice();
  const mountSlice = () => {
    const fragment = document.createDocumentFragment();
    const batch = [];
    const started = performance.now();
    while (turns.length && (batch.length < MIN_BATCH_TURNS || performance.now() - started < SLICE_MS)) {
      batch.unshift(turns.pop());
      fragment.prepend(batch[0].mount());
    }
    return fragment;
  };
  container.append(mountSlice());
  newestDrawn();
  const scroller = container.closest(".messages-scroll") || container;
  while (turns.length && !closed()) {
    await new Promise((resolve) => setTimeout(resolve, 0));
    if (closed()) return;
    const older = mountSlice();
    // Keep what the reader is looking at in place while older turns appear above it.
    const before = scroller.scrollHeight;
    const top = scroller.scrollTop;
    container.prepend(older);
    scroller.scrollTop = top + (scroller.scrollHeight - before);
    olderDrawn();
  }
}
