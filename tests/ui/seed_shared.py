"""`python -m tests.ui.seed_shared USERNAME`: a conversation of USERNAME to share (a tool call,
thinking, an answer in two versions, a hostile Markdown answer: tests/sharing/builders.py).
Prints its id."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from tests.sharing.builders import shareable

    print(shareable(get_user_model().objects.get(username=sys.argv[1])).pk)


if __name__ == "__main__":
    main()
