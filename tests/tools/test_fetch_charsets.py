"""fetch_url decodes a page with its declared charset only when that is a real text encoding.

Python also knows codecs such as utf-7 and unicode_escape, which turn a few bytes into lone
surrogates, and rot13 or base64, which are not text decoders at all: a page naming one must
neither smuggle unstorable text into the run nor make the fetch fail.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from chat.tools.fetch import fetch_url

from .helpers import configure

PAGES = {
    "/utf7": ("text/plain; charset=utf-7", b"caf+AOk- +2AA- end"),
    "/escape": ("text/plain; charset=unicode_escape", b"a \\ud800 b \\x00 c"),
    "/raw-escape": ("text/plain; charset=raw_unicode_escape", b"a \\udfff b"),
    "/rot13": ("text/plain; charset=rot13", b"plain text"),
    "/base64": ("text/plain; charset=base64", b"plain text"),
    "/unknown": ("text/plain; charset=no-such-charset", "d\u00e9j\u00e0".encode()),
    "/nul-name": ('text/plain; charset="utf-8\\x00"', b"named oddly"),
    "/latin1": ("text/html; charset=ISO-8859-1", "<p>caf\u00e9 \u00bd</p>".encode("latin-1")),
    "/cp1252": ("text/plain; charset=windows-1252", "\u201cquoted\u201d \u20ac".encode("cp1252")),
    "/cyrillic": ("text/plain; charset=windows-1251", "\u043f\u0440\u0438\u0432\u0435\u0442".encode("cp1251")),
    "/koi8": ("text/plain; charset=KOI8-R", "\u043c\u0438\u0440".encode("koi8-r")),
    "/sjis": ("text/plain; charset=Shift_JIS", "\u65e5\u672c\u8a9e".encode("shift_jis")),
    "/gbk": ("text/plain; charset=GBK", "\u4e2d\u6587".encode("gbk")),
    "/big5": ("text/plain; charset=big5", "\u7e41\u9ad4".encode("big5")),
    "/euc-kr": ("text/plain; charset=euc-kr", "\ud55c\uad6d\uc5b4".encode("euc-kr")),
    "/utf16-bom": ("text/plain", b"\xff\xfe" + "wide \u00e9".encode("utf-16-le")),
    "/utf16-be-declared": ("text/plain; charset=utf-16", b"\xfe\xff" + "big \u00e9".encode("utf-16-be")),
    "/utf16-lone": ("text/plain; charset=utf-16-le", "x".encode("utf-16-le") + b"\x00\xd8" + "y".encode("utf-16-le")),
    "/utf8-bom-over-latin1": ("text/plain; charset=latin-1", b"\xef\xbb\xbf" + "\u00e9t\u00e9".encode()),
    "/bad-utf8": ("text/plain; charset=utf-8", b"ok \xff\xfe \xed\xa0\x80 end"),  # \xed\xa0\x80: UTF-8 of U+D800
}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        content_type, body = PAGES[self.path]
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def site():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


@pytest.fixture
def fetch(site, context):
    configure(context, fetch={"allowed_hosts": ("127.0.0.1",)})

    async def get(path: str) -> str:
        result = await fetch_url(f"{site}{path}", context)
        result.encode("utf-8")  # raises on a lone surrogate
        return result.split("\n\n", 1)[1]  # the body, after the URL/Status head

    return get


@pytest.mark.parametrize(
    "path, text",
    [
        ("/utf7", "caf+AOk- +2AA- end"),  # read as UTF-8: the bytes as they are
        ("/escape", "a \\ud800 b \\x00 c"),
        ("/raw-escape", "a \\udfff b"),
        ("/rot13", "plain text"),
        ("/base64", "plain text"),
        ("/unknown", "d\u00e9j\u00e0"),
        ("/nul-name", "named oddly"),
    ],
    ids=lambda value: value if isinstance(value, str) and value.startswith("/") else "",
)
async def test_codecs_that_are_not_text_encodings_are_read_as_utf8(fetch, path, text):
    assert await fetch(path) == text


@pytest.mark.parametrize(
    "path, text",
    [
        ("/latin1", "caf\u00e9 \u00bd"),
        ("/cp1252", "\u201cquoted\u201d \u20ac"),
        ("/cyrillic", "\u043f\u0440\u0438\u0432\u0435\u0442"),
        ("/koi8", "\u043c\u0438\u0440"),
        ("/sjis", "\u65e5\u672c\u8a9e"),
        ("/gbk", "\u4e2d\u6587"),
        ("/big5", "\u7e41\u9ad4"),
        ("/euc-kr", "\ud55c\uad6d\uc5b4"),
        ("/utf16-bom", "wide \u00e9"),
        ("/utf16-be-declared", "big \u00e9"),
        ("/utf8-bom-over-latin1", "\u00e9t\u00e9"),  # the byte order mark wins, as in browsers
    ],
    ids=lambda value: value if isinstance(value, str) and value.startswith("/") else "",
)
async def test_real_text_encodings_are_decoded(fetch, path, text):
    assert await fetch(path) == text


async def test_undecodable_bytes_become_replacement_characters(fetch):
    assert await fetch("/utf16-lone") == "x\ufffdy"
    assert await fetch("/bad-utf8") == "ok \ufffd\ufffd \ufffd\ufffd\ufffd end"
