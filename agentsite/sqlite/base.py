"""SQLite whose writers in one process take turns by a lock rather than by SQLite's busy sleeps.

A server process writes from several threads, each with its own connection: the ORM thread's
run starts, the group writer's rounds (chat.runtime.writer), requests. SQLite lets one write
transaction run at a time (BEGIN IMMEDIATE, settings.py) and makes the others poll: its busy
handler sleeps 1, 2, 5, 10, 15, 20, 25... ms between tries, so a writer that finds the lock taken
wakes up to tens of ms after it was freed. In a burst of 100 messages the writer's first round
waited 18-40 ms at BEGIN for the run start's group, and a group 31 ms for a round (measured
around BEGIN in a daphne under `python -m bench.burst_trace`'s load). Here a process-wide lock
is taken before BEGIN and released when the transaction ends (COMMIT, ROLLBACK, or the
connection closed): the next writer of the process starts the moment it is free. Writers in
other processes (a management command) still meet SQLite's busy timeout.

    DATABASES["default"]["ENGINE"] = "agentsite.sqlite"   (settings.py does it for sqlite:// URLs)
"""

from __future__ import annotations

import threading

from django.db.backends.sqlite3 import base

# One per process: every connection of it writes the same file (the test database is one too).
_WRITING = threading.Lock()


class DatabaseWrapper(base.DatabaseWrapper):
    _holds_write_turn = False

    def _start_transaction_under_autocommit(self) -> None:
        # Bounded by the busy timeout SQLite would have waited: past it, BEGIN meets SQLite's own
        # wait and its "database is locked", as without the lock, rather than a hang.
        timeout = float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))
        self._holds_write_turn = _WRITING.acquire(timeout=timeout)
        try:
            super()._start_transaction_under_autocommit()
        except BaseException:
            self._end_write_turn()
            raise

    def _commit(self) -> None:
        try:
            super()._commit()
        finally:
            self._end_write_turn()

    def _rollback(self) -> None:
        try:
            super()._rollback()
        finally:
            self._end_write_turn()

    def _close(self) -> None:
        try:
            super()._close()
        finally:  # closing a connection ends its transaction
            self._end_write_turn()

    def _end_write_turn(self) -> None:
        if self._holds_write_turn:
            self._holds_write_turn = False
            _WRITING.release()
