"""daphne's start-up lines for this setup (settings.LOGGING puts this filter on `daphne.server`),
and its access log's lines escaped like the log's (serving.serve uses EscapedAccessLog).

daphne says "HTTP/2 support not enabled" at every start: here TLS and HTTP/2 are the reverse
proxy's job (deploy/), so the line only makes a new operator look for something to fix. Its
last start-up line, "Listening on TCP address", names an address but not the page to open:
the line that follows it does.
"""

from __future__ import annotations

import logging

from daphne.access import AccessLogGenerator

from serving.log_escape import escape

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
            # A line of its own under the record (serving.log_escape escapes a newline in a message).
            record.plain_line = f"agentsite is ready: open {page_url(str(host), int(port))} in a browser"
        return True


class EscapedAccessLog(AccessLogGenerator):
    """daphne's access log (on standard output unless `--access-log` names a file; off with
    `-v 0`), a line per request written to a stream rather than through logging: what a client
    puts in its request line (a path, a method) is escaped as the log's formatter escapes it."""

    def write_entry(self, host, date, request, status=None, length=None, ident=None, user=None):
        host, request = escape(str(host)), escape(str(request))
        super().write_entry(host, date, request, status=status, length=length, ident=ident, user=user)
