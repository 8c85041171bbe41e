"""`fetch_url`: one web page, as readable text, from public hosts only.

Redirects are followed here, not by httpx, so that every hop's URL goes
through chat.tools.netguard before anything connects to it; the connection
itself is made by netguard's transport to the address it checked. Limits and the
allowed internal hosts come from the run's FetchSettings (chat.tools.config).
"""

from __future__ import annotations

import asyncio
import codecs
import re
from html.parser import HTMLParser

import httpx2

from chat.agent.tools import ToolContext, ToolError
from chat.tools.config import FetchSettings, settings_of
from chat.tools.netguard import FetchPolicy, GuardedTransport

MAX_TEXT_CHARS = 20_000
USER_AGENT = "agentsite-fetch/1.0 (+https://github.com/agentsite)"
_TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml+xml", "application/ld+json")
_REDIRECTS = {301, 302, 303, 307, 308}
# The charsets a page may declare and be decoded with: real text encodings of the web. Python
# also knows codecs such as utf-7, unicode_escape or rot13 that a hostile page could name to
# produce lone surrogates (which broke storing the result) or fail the fetch; any charset not
# listed here is read as UTF-8 with replacement characters.
_CHARSETS = frozenset(codecs.lookup(name).name for name in (
    "utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be", "ascii",
    "latin-1", "iso-8859-2", "iso-8859-3", "iso-8859-4", "iso-8859-5", "iso-8859-6", "iso-8859-7", "iso-8859-8",
    "iso-8859-9", "iso-8859-10", "iso-8859-13", "iso-8859-14", "iso-8859-15", "iso-8859-16",
    "windows-1250", "windows-1251", "windows-1252", "windows-1253", "windows-1254", "windows-1255",
    "windows-1256", "windows-1257", "windows-1258", "koi8-r", "koi8-u", "mac-roman", "cp866", "cp874",
    "shift_jis", "cp932", "euc-jp", "iso-2022-jp", "gb2312", "gbk", "gb18030", "big5", "big5hkscs",
    "euc-kr", "cp949",
))  # fmt: skip
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


class _TextExtractor(HTMLParser):
    """Visible text of an HTML page: script, style and similar dropped, blocks on their own lines."""

    _SKIP = {"script", "style", "noscript", "template", "svg", "head", "iframe", "object"}
    _BLOCK = {
        "p", "div", "br", "li", "ul", "ol", "tr", "table", "section", "article", "header", "footer",
        "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "hr", "dt", "dd", "main", "nav", "title",
    }  # fmt: skip

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title = ""
        self._skipping = 0
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        if tag in self._SKIP:
            self._skipping += 1
        if tag == "title":
            self._in_title = True
        if tag in self._BLOCK:
            self.parts.append("\n")
        if tag in ("h1", "h2", "h3"):
            self.parts.append("# ")
        if tag == "li":
            self.parts.append("- ")

    def handle_endtag(self, tag):
        if tag in self._SKIP and self._skipping:
            self._skipping -= 1
        if tag == "title":
            self._in_title = False
        if tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        elif not self._skipping:
            self.parts.append(data)


def html_to_text(html: str) -> tuple[str, str]:
    """(title, text) of an HTML document."""
    parser = _TextExtractor()
    parser.feed(html)
    parser.close()
    text = "".join(parser.parts)
    lines = [re.sub(r"[ \t\r\f\v\xa0]+", " ", line).strip() for line in text.split("\n")]
    text = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return " ".join(parser.title.split()), text


async def _read_capped(response: httpx2.Response, limit: int) -> tuple[bytes, bool]:
    chunks, size = [], 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False


async def _fetch(url: str, settings: FetchSettings) -> str:
    policy = FetchPolicy(settings.allowed_hosts)
    try:
        target = httpx2.URL(url.strip())
    except Exception as exc:  # httpx2.InvalidURL and friends
        raise ToolError(f"not a valid URL: {exc}") from None
    async with httpx2.AsyncClient(
        transport=GuardedTransport(policy),
        follow_redirects=False,
        trust_env=False,
        timeout=httpx2.Timeout(settings.timeout),
        headers={"User-Agent": USER_AGENT, "Accept": "text/html,text/plain,application/json;q=0.9,*/*;q=0.5"},
    ) as client:
        for _hop in range(settings.max_redirects + 1):
            await policy.check_url(target)
            try:
                async with client.stream("GET", target) as response:
                    if response.status_code in _REDIRECTS and "location" in response.headers:
                        try:
                            target = target.join(response.headers["location"])
                        except Exception:
                            raise ToolError(f"{target} redirects to an invalid URL") from None
                        continue
                    return await _render(target, response, settings.max_bytes)
            except httpx2.TimeoutException:
                raise ToolError(f"fetching {target} timed out") from None
            except httpx2.HTTPError as exc:
                raise ToolError(f"fetching {target} failed: {type(exc).__name__}: {exc}") from None
    raise ToolError(f"too many redirects (more than {settings.max_redirects}); last one pointed to {target}")


def _charset(declared: str | None, body: bytes) -> str:
    """The codec to decode a body with: its byte order mark first (as browsers do), then the
    declared charset if it is a real text encoding, else UTF-8."""
    for bom, name in _BOMS:
        if body.startswith(bom):
            return name
    try:
        name = codecs.lookup(declared.strip()).name if declared else "utf-8"
    except (LookupError, ValueError):  # unknown, or a name Python cannot even look up
        return "utf-8"
    return name if name in _CHARSETS else "utf-8"


async def _render(url: httpx2.URL, response: httpx2.Response, max_bytes: int) -> str:
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type and not content_type.startswith(_TEXT_TYPES):
        raise ToolError(f"{url} is {content_type}, not text; fetch_url reads web pages and text only")
    body, cut = await _read_capped(response, max_bytes)
    text = body.decode(_charset(response.charset_encoding, body), errors="replace")
    title = ""
    if content_type in ("text/html", "application/xhtml+xml") or (not content_type and "<html" in text[:1000].lower()):
        title, text = html_to_text(text)
    if len(text) > MAX_TEXT_CHARS:
        text, cut = text[:MAX_TEXT_CHARS], True
    head = [f"URL: {url}", f"Status: {response.status_code}"]
    if title:
        head.append(f"Title: {title}")
    note = f"\n[... truncated: the page is longer than {MAX_TEXT_CHARS} characters or {max_bytes} bytes]" if cut else ""
    return "\n".join(head) + "\n\n" + text + note


async def fetch_url(url: str, context: ToolContext) -> str:
    """Fetch a web page (http or https) and return its readable text. Private and internal addresses are refused."""
    settings = settings_of(context).fetch
    try:
        async with asyncio.timeout(settings.timeout):
            return await _fetch(url, settings)
    except TimeoutError:
        raise ToolError(f"fetching {url} took longer than {settings.timeout:g} s") from None
