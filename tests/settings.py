"""Settings of the test run: the project's own, with what a test run lacks set first.

agentsite.settings refuses to start without SECRET_KEY while DEBUG is off, and CI has none:
a throwaway key is put in the environment, where the servers the tests start (they copy
it) find it too. The sign-up limit would stop the suite's many sign-ups from 127.0.0.1:
it is off unless a test turns it on (tests/accounts/test_signin.py, tests/e2e/test_nginx.py); so are
generated titles (below).
The suite imports the ASGI application to drive it in-process before its test database exists:
the start-up checks are for the servers it starts, which run on agentsite.settings.
"""

import os
import secrets

os.environ.setdefault("SECRET_KEY", "test-" + secrets.token_urlsafe(40))
os.environ.setdefault("SIGNUP_RATE_LIMIT", "0")

from agentsite.settings import *  # noqa: E402, F403

CHECK_BEFORE_SERVING = False
# The fake model serves scripted replies in order: a title call after each first answer would take
# a reply scripted for a run. The tests of titles turn them on (tests/runtime/test_titles.py).
AGENT_TITLES = False
