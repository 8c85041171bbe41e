"""Split reasoning out of a streamed content channel.

Models such as DeepSeek-R1, QwQ and MiniMax put their reasoning inline, between
`<think>` and `</think>`, in the same stream as the answer. A tag can arrive cut
across chunks (`<th` + `ink>`), so the parser holds back any tail that could be the
start of a tag and releases it once the next chunk (or the end) settles it.
"""

from __future__ import annotations

from collections.abc import Sequence

DEFAULT_TAGS: tuple[tuple[str, str], ...] = (("<think>", "</think>"),)

THINKING = "thinking"
TEXT = "text"

Piece = tuple[str, str]  # (THINKING | TEXT, content)


def _partial_suffix(buffer: str, tags: Sequence[str]) -> int:
    """Length of the longest tail of `buffer` that is a proper prefix of one of `tags`."""
    longest = 0
    for tag in tags:
        for size in range(min(len(tag) - 1, len(buffer)), longest, -1):
            if buffer.endswith(tag[:size]):
                longest = size
                break
    return longest


class ThinkTagParser:
    """Stateful splitter of a content stream into thinking and text pieces.

    `start_in_thinking` is for templates that open the reasoning block in the
    prompt, so the stream starts inside it and only the closing tag appears.
    """

    def __init__(self, tags: Sequence[tuple[str, str]] = DEFAULT_TAGS, *, start_in_thinking: bool = False):
        if not tags:
            raise ValueError("at least one tag pair is needed")
        self._tags = tuple(tags)
        self._openers = [open_tag for open_tag, _ in self._tags]
        self._marks = frozenset(tag[0] for pair in self._tags for tag in pair)
        self._closer: str | None = self._tags[0][1] if start_in_thinking else None
        self._held = ""
        # Whitespace at the start of a block belongs to the tags around it ("<think>\n",
        # "</think>\n\n"): Qwen3's empty "<think>\n\n</think>" must leave no thinking at all.
        self._strip_leading = start_in_thinking

    @property
    def in_thinking(self) -> bool:
        return self._closer is not None

    def feed(self, chunk: str) -> list[Piece]:
        if not self._held and not self._strip_leading and not any(mark in chunk for mark in self._marks):
            # Most chunks hold no character a tag starts with: nothing to find or hold back.
            return [(THINKING if self._closer is not None else TEXT, chunk)] if chunk else []
        pieces: list[Piece] = []
        buffer = self._held + chunk
        self._held = ""
        while buffer:
            if self._closer is not None:
                end = buffer.find(self._closer)
                if end >= 0:
                    self._emit(pieces, THINKING, buffer[:end])
                    buffer = buffer[end + len(self._closer) :]
                    self._closer = None
                    self._strip_leading = True
                    continue
                keep = _partial_suffix(buffer, [self._closer])
            else:
                found = [(buffer.find(o), o, c) for o, c in self._tags if o in buffer]
                if found:
                    start, opener, closer = min(found)
                    self._emit(pieces, TEXT, buffer[:start])
                    buffer = buffer[start + len(opener) :]
                    self._closer = closer
                    self._strip_leading = True
                    continue
                keep = _partial_suffix(buffer, self._openers)
            kind = THINKING if self._closer is not None else TEXT
            self._emit(pieces, kind, buffer[: len(buffer) - keep])
            self._held = buffer[len(buffer) - keep :]
            break
        return pieces

    def flush(self) -> list[Piece]:
        """End of stream: a held tail was not a tag after all."""
        pieces: list[Piece] = []
        held, self._held = self._held, ""
        self._emit(pieces, THINKING if self._closer is not None else TEXT, held)
        return pieces

    def _emit(self, pieces: list[Piece], kind: str, content: str) -> None:
        if self._strip_leading:
            content = content.lstrip()
            if content:
                self._strip_leading = False
        if not content:
            return
        if pieces and pieces[-1][0] == kind:
            pieces[-1] = (kind, pieces[-1][1] + content)
        else:
            pieces.append((kind, content))
