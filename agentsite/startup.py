"""Start-up failures as one line an operator can act on, not a traceback.

`manage.py` and `agentsite/asgi.py` (daphne) run inside `one_line_errors()`: a
setting that cannot be read (ImproperlyConfigured names the variable) or a
database that cannot be reached ends the process with one line on stderr and
exit status 1. daphne has no start-up step of its own, so asgi.py also calls
`check_before_serving()`: the database must answer and the system checks must
pass before it serves anything.
"""

from __future__ import annotations

import contextlib
import sys

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, SystemCheckError
from django.db import DatabaseError, OperationalError, connections


@contextlib.contextmanager
def one_line_errors():
    try:
        yield
    except ImproperlyConfigured as exc:
        raise SystemExit(f"agentsite: configuration error: {exc}") from None
    except OperationalError:
        problem = database_problem()
        if problem is None:
            raise  # the database answers: an error of the command itself, traceback and all
        raise SystemExit(f"agentsite: {problem}") from None


def database_problem() -> str | None:
    """Why the default database cannot be reached, naming DATABASE_URL; None when it answers."""
    connection = connections["default"]
    try:
        connection.close()
        connection.ensure_connection()
    except DatabaseError as exc:
        # The driver's first line says why ("Connection refused", "database "x" does not
        # exist", "unable to open database file"); the URL itself, with its password, is not shown.
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        data = connection.settings_dict
        if connection.vendor == "sqlite":
            where = f"the SQLite database {data['NAME']}"
        else:
            host, port = data["HOST"] or "localhost", data["PORT"] or "default port"
            where = f"the {connection.vendor} database {data['NAME']!r} at {host}:{port}"
        return f"DATABASE_URL: cannot connect to {where}: {reason}"
    finally:
        connection.close()
    return None


def check_before_serving() -> None:
    """Refuse to serve (exit) when the database does not answer or a system check finds an error."""
    problem = database_problem()
    if problem is not None:
        raise SystemExit(f"agentsite: {problem}")
    try:
        # What runserver and migrate do: warnings go to stderr, errors stop the process.
        BaseCommand(stderr=sys.stderr).check(display_num_errors=True)
    except SystemCheckError as exc:
        report = str(exc).removeprefix("SystemCheckError: ")
        raise SystemExit(f"agentsite: the server will not start. {report}") from None
