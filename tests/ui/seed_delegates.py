"""`python -m tests.ui.seed_delegates USERNAME BASE_URL`: two agent profiles open to USERNAME alone,
written through the admin's form while the server runs: "Helper" (model helper-1) and "Boss"
(model boss-1), whose delegate Helper is (docs/protocol.md, "Sub-agents"). Both talk to BASE_URL."""

from __future__ import annotations

import os
import sys


def main() -> None:
    username, base_url = sys.argv[1:3]
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model

    from chat.agents.form import AgentProfileForm

    user = get_user_model().objects.get(username=username)
    made = {}
    for slug, name, model, delegates in (
        (f"helper-{username}", "Helper", "helper-1", []),
        (f"boss-{username}", "Boss", "boss-1", [f"helper-{username}"]),
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
                "tools": "",
                "max_iterations": "10",
                "max_retries": "3",
                "retry_interval": "0",
                "users": [user.pk],
                "delegates": [made[d].pk for d in delegates],
            }
        )
        if not form.is_valid():
            raise SystemExit(f"{slug}: {form.errors.as_json()}")
        made[slug] = form.save()
    print("seeded")


if __name__ == "__main__":
    main()
