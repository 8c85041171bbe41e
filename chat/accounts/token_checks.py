"""Bearer token checks of the event loop's requests, grouped: the checks that arrive while a group
is being looked up form the next group, one trip to a request database thread for all of them.

In a burst of 100 API calls each request's check was a trip of its own, and each waited for one
of the request database threads and then for the loop to take its answer back, before anything
else of the request went on (issue 55, docs/performance.md). Grouped, nothing is cached: every
check still reads its token's row, so a token revoked (deleted, expired, its user deactivated) is
refused by the next check after the change, on every process, as before.
"""

from __future__ import annotations

from chat.accounts.token_lockout import TokenCheck, token_check
from chat.agent.batching import GroupedCalls
from serving.loop_middleware import request_db

# token_check(value, address) (chat.accounts.token_lockout) in the running loop's next group.
token_check_batched: GroupedCalls[TokenCheck] = GroupedCalls(token_check, request_db, name="token-checks")
