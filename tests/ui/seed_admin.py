"""`python -m tests.ui.seed_admin USERNAME`: makes USERNAME a superuser (the admin's every form)
and adds an agent profile with no tools, open to USERNAME; prints its primary key."""

from __future__ import annotations

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from chat.models import AgentProfile

    user = get_user_model().objects.get(username=sys.argv[1])
    user.is_staff = user.is_superuser = True
    user.save()
    profile = AgentProfile.objects.create(
        slug=f"plain-{user.username}", name="Plain", model="plain-1", description="No tools", tools=[]
    )
    profile.users.add(user)
    print(profile.pk)


if __name__ == "__main__":
    main()
