"""Rows of the hot path inserted in one executemany, without bulk_create's work per object.

Run starts and the group writer insert hundreds of Run and Event rows at once, on a thread that
must win the GIL back from the busy event loop. bulk_create compiles every value of every object
through the query compiler and reaches the connection through Django's per-context proxy each
time: for the Run and user_message rows of 100 starts it took 8.3 ms of that thread, where the
same values prepared here take 3.7 (SQLite; `python -m bench.inserts`). The values are still
prepared by their own fields for the database in use (pre_save, then get_db_prep_save), so
SQLite and PostgreSQL get what bulk_create would give them; a column's equal values (a round's
`now`, a run's id on each of its events) are prepared once."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.db import connections, router
from django.db.models import AutoField, Field, JSONField, Model


def insert_objects(objs: Sequence[Model]) -> None:
    """Insert new instances of one model, as bulk_create does but for a database-generated
    primary key, which the instances do not get back (callers that need it use bulk_create).
    Afterwards they are saved instances: a later save() updates rather than inserts."""
    if not objs:
        return
    model = type(objs[0])
    # Every column but a database-generated primary key.
    fields = [field for field in model._meta.concrete_fields if not isinstance(field, AutoField)]
    insert_rows(model, [field.attname for field in fields], [[f.pre_save(obj, True) for f in fields] for obj in objs])
    alias = router.db_for_write(model)
    for obj in objs:
        obj._state.adding = False
        obj._state.db = alias


def insert_rows(model: type[Model], names: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """Insert rows given as values of the named fields, without an instance per row (the other
    fields must have a database default or be the generated primary key; a foreign key is named
    by its attname, `run_id`)."""
    fields = [model._meta.get_field(name) for name in names]
    connection = connections[router.db_for_write(model)]
    preps = [_preparer(field, connection) for field in fields]
    prepared = [[prep(value) for prep, value in zip(preps, row, strict=True)] for row in rows]
    if prepared:
        _execute(model, fields, prepared, connection)


def _preparer(field: Field, connection) -> Callable[[Any], Any]:
    """The field's preparation of a value for the database, remembered per value where values
    can be dict keys (a JSON payload cannot, and its values are seldom equal)."""
    if isinstance(field, JSONField):
        return lambda value: field.get_db_prep_save(value, connection)
    done: dict[Any, Any] = {}

    def prepare(value: Any) -> Any:
        try:
            return done[value]
        except KeyError:
            prepared = done[value] = field.get_db_prep_save(value, connection)
            return prepared

    return prepare


def _execute(model: type[Model], fields: list[Field], rows: list[list[Any]], connection) -> None:
    # One short statement executed per row (sqlite3 steps it in C, psycopg pipelines it): a
    # statement of many rows is no faster on SQLite, and psycopg parses it anew every time.
    quote = connection.ops.quote_name
    columns = ", ".join(quote(field.column) for field in fields)
    values = ", ".join(["%s"] * len(fields))
    with connection.cursor() as cursor:
        cursor.executemany(f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES ({values})", rows)
