"""Messages a person sends a run while it works (docs/protocol.md, "Steering"): the loop asks its
steering source, right before every model call, for those sent since the last one; each becomes
a user message of that call's request (after the tool round's results) and a `steer_applied`
event. Where they are kept, and how a run claims them, is the server's business."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Steer:
    """A message a person sent a run while it works (its id: the event names it)."""

    queue_id: str
    content: str


# Called before each model call: the steers sent since the last call, claimed for this run.
SteeringSource = Callable[[], Awaitable[Sequence[Steer]]]


async def steers_now(source: SteeringSource | None) -> Sequence[Steer]:
    """The steers to take in before the next model call; none when the source fails: they stay
    where they are kept, to be taken in at the next call or to wait for after the run."""
    if source is None:
        return ()
    try:
        return await source()
    except Exception:
        logger.exception("the run's steers could not be read; its model is called without them")
        return ()
