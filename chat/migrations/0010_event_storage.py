# The event log's storage per token (issue 17): the two single-column foreign-key indexes of
# Event go (the (conversation, seq) and (run, seq) indexes lead with the same columns), and
# payload JSON keeps non-ASCII text as UTF-8. The state changes need no table rebuild: the
# database side is two DROP INDEX (their names are Django's, the same on SQLite and PostgreSQL),
# and the encoder lives in Python only.

import django.db.models.deletion
from django.db import migrations, models

import chat.models

INDEXES = {
    "chat_event_conversation_id_7f09692f": "conversation_id",
    "chat_event_run_id_cbc39321": "run_id",
}


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0009_agent_profiles"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{name}"',
                    reverse_sql=f'CREATE INDEX IF NOT EXISTS "{name}" ON "chat_event" ("{column}")',
                )
                for name, column in INDEXES.items()
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="event",
                    name="conversation",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="chat.conversation",
                    ),
                ),
                migrations.AlterField(
                    model_name="event",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="chat.run",
                    ),
                ),
                migrations.AlterField(
                    model_name="event",
                    name="payload",
                    field=models.JSONField(encoder=chat.models.Utf8JSONEncoder),
                ),
            ],
        ),
    ]
