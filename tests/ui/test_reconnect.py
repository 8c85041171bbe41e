"""The page's reconnect waits (static/chat/socket.js), in the browser that runs them."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.browser

# Each wait of attempts 0..6 for random() = 0, 0.5 and 0.75, from the module the page loaded.
DELAYS = """async () => {
  const url = performance.getEntriesByType("resource").map((e) => e.name).find((n) => /\\/socket[.][^/]*js$/.test(n));
  const { reconnectDelayMs } = await import(url);
  return [0, 0.5, 0.75].map((r) => [0, 1, 2, 3, 4, 5, 6].map((attempt) => reconnectDelayMs(attempt, () => r)));
}"""


def test_the_first_reconnect_is_spread_over_two_seconds_and_later_ones_back_off(user_page):
    low, middle, high = user_page.evaluate(DELAYS)
    # After a server restart every page drops at once: the first attempts must not come back together.
    assert (low[0], middle[0], high[0]) == (250, 1250, 1750)
    # Nor the retries of handshakes that failed together: +-50% around each step.
    assert low[1:] == [500, 1000, 2000, 4000, 7500, 7500]
    assert middle[1:] == [1000, 2000, 4000, 8000, 15000, 15000]
    assert high[1:] == [1250, 2500, 5000, 10000, 18750, 18750]
