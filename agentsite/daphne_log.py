"""daphne's start-up lines for this setup (settings.LOGGING puts this filter on `daphne.server`).

daphne says "HTTP/2 support not enabled" at every start: here TLS and HTTP/2 are the reverse
proxy's job (deploy/), so the line only makes a new operator look for something to fix. Its
last start-up line, "Listening on TCP address", names an address but not the page to open:
the line that follows it does.
"""

from __future__ import annotations

import logging

HTTP2_NOTICE = "HTTP/2 support not enabled (install the http2 and tls Twisted extras)"
LISTENING = "Listening on TCP address %s:%s"
# A wildcard address is where the server listens, not one a browser can open.
_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "::1"}


def page_url(host: str, port: int) -> str:
    host = _WILDCARDS.get(host, host)
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


class DaphneStartupLines(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg == HTTP2_NOTICE:
            return False
        if record.msg == LISTENING and isinstance(record.args, tuple) and len(record.args) == 2:
            host, port = record.args
            record.msg = LISTENING + "\nagentsite is ready: open %s in a browser"
            record.args = (host, port, page_url(str(host), int(port)))
        return True
