"""Bearer token checks of the event loop's requests, grouped: the checks that arrive while a group
is being looked up form the next group, one trip to a request database thread, one read of the
failure counts and one query of the tokens for all of them.

In a burst of 100 API calls each request's check was a trip of its own, and each waited for one
of the request database threads and then for the loop to take its answer back, before anything
else of the request went on (issue 55, docs/performance.md). Grouped, nothing is cached: every
check still reads its token's row, so a token revoked (deleted, expired, its user deactivated) is
refused by the next check after the change, on every process, as before. The failure counts are
read once per group: failed attempts of one group are all counted, and a lock-out they reach
refuses from the next group on (as checks made at once on several threads did).
"""

from __future__ import annotations

from chat.accounts.token_lockout import TokenCheck, token_checks
from chat.agent.batching import Batcher
from chat.agent.perloop import PerLoop
from serving.loop_middleware import request_db

_checks: PerLoop[Batcher[tuple[str, str], TokenCheck]] = PerLoop(
    lambda: Batcher(request_db(token_checks), name="token-checks")
)


async def token_check_batched(value: str, address: str) -> TokenCheck:
    """token_check(value, address) (chat.accounts.token_lockout), in the running loop's next group:
    one read of the failure counts and one query of the tokens for the group (token_checks)."""
    return await _checks.get().submit((value, address))
