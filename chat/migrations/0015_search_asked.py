"""The user's own words of each search document, kept apart (`asked`) so that a hit in them
ranks above a hit in an answer (chat.eventlog.search).

SQLite's FTS5 table gets `asked` as a second column (the table and its triggers are made
again: an FTS5 table's columns cannot be altered); PostgreSQL matches `asked` with the same
to_tsvector expression, evaluated only on the rows of the conversations that already match.
Existing documents are written again to fill the column.
"""

from django.db import migrations, models

from chat.migrations._search_documents import index_finished_runs

SQLITE_FTS = [
    "DROP TRIGGER IF EXISTS chat_searchdocument_ai",
    "DROP TRIGGER IF EXISTS chat_searchdocument_ad",
    "DROP TRIGGER IF EXISTS chat_searchdocument_au",
    "DROP TABLE IF EXISTS chat_searchdocument_fts",
    "CREATE VIRTUAL TABLE chat_searchdocument_fts USING fts5(body, asked, content='chat_searchdocument', content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER chat_searchdocument_ai AFTER INSERT ON chat_searchdocument BEGIN "
    "INSERT INTO chat_searchdocument_fts(rowid, body, asked) VALUES (new.id, new.body, new.asked); END",
    "CREATE TRIGGER chat_searchdocument_ad AFTER DELETE ON chat_searchdocument BEGIN "
    "INSERT INTO chat_searchdocument_fts(chat_searchdocument_fts, rowid, body, asked) VALUES ('delete', old.id, old.body, old.asked); END",
    "CREATE TRIGGER chat_searchdocument_au AFTER UPDATE ON chat_searchdocument BEGIN "
    "INSERT INTO chat_searchdocument_fts(chat_searchdocument_fts, rowid, body, asked) VALUES ('delete', old.id, old.body, old.asked); "
    "INSERT INTO chat_searchdocument_fts(rowid, body, asked) VALUES (new.id, new.body, new.asked); END",
    "INSERT INTO chat_searchdocument_fts(chat_searchdocument_fts) VALUES ('rebuild')",
]
# Back to migration 0006's single-column table.
SQLITE_FTS_BACK = [
    "DROP TRIGGER IF EXISTS chat_searchdocument_ai",
    "DROP TRIGGER IF EXISTS chat_searchdocument_ad",
    "DROP TRIGGER IF EXISTS chat_searchdocument_au",
    "DROP TABLE IF EXISTS chat_searchdocument_fts",
    "CREATE VIRTUAL TABLE chat_searchdocument_fts USING fts5(body, content='chat_searchdocument', content_rowid='id', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER chat_searchdocument_ai AFTER INSERT ON chat_searchdocument BEGIN "
    "INSERT INTO chat_searchdocument_fts(rowid, body) VALUES (new.id, new.body); END",
    "CREATE TRIGGER chat_searchdocument_ad AFTER DELETE ON chat_searchdocument BEGIN "
    "INSERT INTO chat_searchdocument_fts(chat_searchdocument_fts, rowid, body) VALUES ('delete', old.id, old.body); END",
    "CREATE TRIGGER chat_searchdocument_au AFTER UPDATE ON chat_searchdocument BEGIN "
    "INSERT INTO chat_searchdocument_fts(chat_searchdocument_fts, rowid, body) VALUES ('delete', old.id, old.body); "
    "INSERT INTO chat_searchdocument_fts(rowid, body) VALUES (new.id, new.body); END",
    "INSERT INTO chat_searchdocument_fts(chat_searchdocument_fts) VALUES ('rebuild')",
]


def _run(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "sqlite":
            for sql in statements:
                schema_editor.execute(sql)

    return run



class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0014_conversation_viewed_seq"),
    ]

    operations = [
        migrations.AddField(model_name="searchdocument", name="asked", field=models.TextField(default="")),
        migrations.RunPython(_run(SQLITE_FTS), _run(SQLITE_FTS_BACK)),
        migrations.RunPython(index_finished_runs, migrations.RunPython.noop),
    ]
