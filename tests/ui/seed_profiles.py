"""`python -m tests.ui.seed_profiles USERNAME BASE_URL_A BASE_URL_B`: two agent profiles open to
USERNAME alone, written through the admin's form while the server runs (no restart).

"Coder" (model code-1, calculator) talks to BASE_URL_A, "Researcher" (model research-1,
current_time, accepts images) to BASE_URL_B; both with the server's own OPENAI_API_KEY.

`python -m tests.ui.seed_profiles USERNAME --revoke SLUG`: the user may no longer use that profile.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    username, base_a, base_b = sys.argv[1:4]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from chat.agents.form import AgentProfileForm
    from chat.models import AgentProfile

    user = get_user_model().objects.get(username=username)
    if base_a == "--revoke":
        AgentProfile.objects.get(slug=base_b).users.remove(user)
        print("revoked")
        return
    for slug, name, model, base_url, tools, vision in (
        (f"coder-{username}", "Coder", "code-1", base_a, "calculator", ""),
        (f"researcher-{username}", "Researcher", "research-1", base_b, "current_time", "on"),
    ):
        form = AgentProfileForm(
            data={
                "slug": slug,
                "name": name,
                "description": f"{name} for the browser test",
                "enabled": "on",
                "base_url": base_url,
                "api_key_env": "OPENAI_API_KEY",
                "model": model,
                "tools": tools,
                "vision": vision,
                "max_iterations": "10",
                "max_retries": "3",
                "retry_interval": "0",
                "users": [user.pk],
            }
        )
        if not form.is_valid():
            raise SystemExit(f"{slug}: {form.errors.as_json()}")
        form.save()
    print("seeded")


if __name__ == "__main__":
    main()
