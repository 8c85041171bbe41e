"""`python -m tests.ui.seed_conversations USERNAME COUNT`: COUNT conversations for USERNAME.

Titled "Seeded 000" (oldest) to "Seeded COUNT-1" (newest); every three share one updated_at,
so that the list's pages must break ties by id. Prints the ids, newest first.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta


def main() -> None:
    username, count = sys.argv[1], int(sys.argv[2])
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from chat.models import Conversation

    user = get_user_model().objects.get(username=username)
    start = timezone.now() - timedelta(days=1)
    rows = [
        Conversation(owner=user, title=f"Seeded {index:03d}", updated_at=start + timedelta(seconds=index // 3))
        for index in range(count)
    ]
    Conversation.objects.bulk_create(rows)
    newest_first = Conversation.objects.filter(owner=user).order_by("-updated_at", "-id")
    print("\n".join(str(pk) for pk in newest_first.values_list("pk", flat=True)))


if __name__ == "__main__":
    main()
