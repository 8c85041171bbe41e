"""A shared link keeps its snapshot's branch (`leaf_seq`) and title (chat/sharing/snapshot.py).
Links made before get the title their conversation has now (the one of the moment is not
known) and the newest branch up to their `up_to_seq`, the one the chat page showed by default."""

from django.db import migrations, models


def fill(apps, schema_editor):
    ShareLink = apps.get_model("chat", "ShareLink")
    Event = apps.get_model("chat", "Event")
    for link in ShareLink.objects.select_related("conversation").iterator():
        newest = (
            Event.objects.filter(conversation_id=link.conversation_id, type="user_message", seq__lte=link.up_to_seq)
            .order_by("-seq")
            .values_list("seq", flat=True)
            .first()
        )
        link.leaf_seq = newest or 0
        link.title = link.conversation.title
        link.save(update_fields=["leaf_seq", "title"])


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0026_account_theme"),
    ]

    operations = [
        migrations.AddField(
            model_name="sharelink",
            name="leaf_seq",
            field=models.PositiveBigIntegerField(default=0),
            preserve_default=False,
        ),
        migrations.AddField(
            model_name="sharelink",
            name="title",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
