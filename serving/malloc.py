"""glibc's malloc told to give large blocks back to the system when they are freed.

A decoded image is a few hundred megabytes at most (chat.conversations.images), allocated by
Pillow in blocks of 16 MB. glibc serves an allocation above its mmap threshold with a mapping of
its own, unmapped when freed; but each such block freed raises the threshold to its size (up to
32 MB), after which blocks that size are carved from the arena of the thread asking, and a freed
one stays resident in that arena for a later allocation of that thread. The server decodes in
many threads (each request's, the worker threads of asyncio.to_thread), most with an arena of
their own: three /v1 requests with a 49-megapixel image each left 1.3 GB resident after they had
ended (tests/e2e/test_image_memory.py). Setting the threshold stops glibc from moving it: every
allocation of LARGE or more is a mapping of its own, returned to the system when freed. Python's
own objects are far smaller and are not affected.
"""

from __future__ import annotations

import ctypes

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
LARGE = 4 * 1024 * 1024


def give_back_large_blocks() -> bool:
    """True when the C library took the setting; False on one without mallopt (nothing to tune)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    return mallopt(M_MMAP_THRESHOLD, LARGE) == 1
