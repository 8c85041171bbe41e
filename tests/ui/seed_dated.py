"""`python -m tests.ui.seed_dated USERNAME TITLE=ISO-TIME ...`: a conversation per pair for
USERNAME, last active at that time (the sidebar's date groups). Prints the ids in order."""

from __future__ import annotations

import os
import sys
from datetime import datetime


def main() -> None:
    username, pairs = sys.argv[1], sys.argv[2:]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from chat.models import Conversation

    user = get_user_model().objects.get(username=username)
    for pair in pairs:
        title, _, stamp = pair.rpartition("=")
        conversation = Conversation.objects.create(owner=user, title=title)
        # updated_at is auto_now: set it afterwards, as it would have been.
        Conversation.objects.filter(pk=conversation.pk).update(updated_at=datetime.fromisoformat(stamp))
        print(conversation.pk)


if __name__ == "__main__":
    main()
