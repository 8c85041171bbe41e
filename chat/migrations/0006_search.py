"""The search documents of finished runs and their full-text index (chat.eventlog.search).

The index is vendor-specific, so it is created by SQL here rather than by a model Meta
index: a GIN over to_tsvector('simple', body) on PostgreSQL (the expression chat.eventlog.search
queries with, so the planner uses it), an external-content FTS5 table kept by triggers on
SQLite. Existing finished runs are indexed at once.
"""

from django.db import migrations, models

from chat.migrations._search_documents import index_finished_runs
import django.db.models.deletion

PG_INDEX = "CREATE INDEX chat_searchdocument_fts ON chat_searchdocument USING gin (to_tsvector('simple'::regconfig, body))"
SQLITE_FTS = [
    "CREATE VIRTUAL TABLE chat_searchdocument_fts USING fts5(body, content='chat_searchdocument', content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER chat_searchdocument_ai AFTER INSERT ON chat_searchdocument BEGIN "
    "INSERT INTO chat_searchdocument_fts(rowid, body) VALUES (new.id, new.body); END",
    "CREATE TRIGGER chat_searchdocument_ad AFTER DELETE ON chat_searchdocument BEGIN "
    "INSERT INTO chat_searchdocument_fts(chat_searchdocument_fts, rowid, body) VALUES ('delete', old.id, old.body); END",
    "CREATE TRIGGER chat_searchdocument_au AFTER UPDATE ON chat_searchdocument BEGIN "
    "INSERT INTO chat_searchdocument_fts(chat_searchdocument_fts, rowid, body) VALUES ('delete', old.id, old.body); "
    "INSERT INTO chat_searchdocument_fts(rowid, body) VALUES (new.id, new.body); END",
]
SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS chat_searchdocument_ai",
    "DROP TRIGGER IF EXISTS chat_searchdocument_ad",
    "DROP TRIGGER IF EXISTS chat_searchdocument_au",
    "DROP TABLE IF EXISTS chat_searchdocument_fts",
]


def create_index(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    statements = [PG_INDEX] if vendor == "postgresql" else SQLITE_FTS if vendor == "sqlite" else []
    for sql in statements:
        schema_editor.execute(sql)


def drop_index(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    statements = ["DROP INDEX IF EXISTS chat_searchdocument_fts"] if vendor == "postgresql" else SQLITE_DROP
    for sql in statements:
        schema_editor.execute(sql)



class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0005_versions"),
    ]

    operations = [
        migrations.CreateModel(
            name="SearchDocument",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("body", models.TextField()),
                (
                    "conversation",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="search_documents",
                        to="chat.conversation",
                    ),
                ),
                (
                    "run",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE, related_name="search_document", to="chat.run"
                    ),
                ),
            ],
        ),
        migrations.RunPython(create_index, drop_index),
        migrations.RunPython(index_finished_runs, migrations.RunPython.noop),
    ]
