"""The HTTP edge: the pages (pages.py), the JSON API (api.py) and its files API (files.py), the
account page and sign-in protection (account.py, signin.py, forms.py), the session engine,
the language and the Content-Security-Policy middleware. Every view checks ownership through
the selectors of chat.conversations. See docs/architecture.md, "web/"."""
