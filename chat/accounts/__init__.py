"""Who is asking, and how much they may (docs/architecture.md, "chat/accounts/"): sign-in with a
password or OpenID Connect (signin.py, oidc.py, oidc_users.py), sessions that name their user
(sessions.py), API tokens and the Bearer header (tokens.py, bearer.py, token_lockout.py over
process_cache.py), an ended session or token closing its sockets and streams (revocation.py), the
account's settings and deletion (account.py), and the limits a user gets: from their groups
(limits.py), and on open sockets and streams (sockets.py). Below the doors: they import it, it
imports none of them."""
