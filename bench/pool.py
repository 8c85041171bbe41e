"""Seeded users and conversations, handed out fresh for each measurement."""

from __future__ import annotations


class Pool:
    def __init__(self, seeded: dict):
        users = seeded["users"]
        width = max(len(u["conversations"]) for u in users)
        # Across users first, so that n consecutive conversations belong to n users.
        self._free = [
            (u["session"], u["conversations"][j]) for j in range(width) for u in users if j < len(u["conversations"])
        ]

    def take(self, n: int) -> list[tuple[str, str]]:
        if n > len(self._free):
            raise RuntimeError(f"the pool has {len(self._free)} conversations left, {n} asked")
        taken, self._free = self._free[:n], self._free[n:]
        return taken
