"""`/schedules/triggers/`: the user's triggers listed, made (the secret shown once, in the answer
that made it), edited, disabled, enabled and deleted by the same rules as `/api/triggers/`;
login required, and another user's triggers out of reach."""

from __future__ import annotations

import pytest

from chat.models import Trigger
from chat.scheduling.triggers import bearer_holds, trigger_create

pytestmark = pytest.mark.django_db


def test_the_page_needs_a_login(client):
    response = client.get("/schedules/triggers/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_make_shows_the_secret_once_then_list_edit_disable_enable_delete(api, alice):
    made = api.post(
        "/schedules/triggers/",
        {"name": "Triage", "prompt": "Triage this: {{payload}}", "agent": "default", "enabled": "on"},
    )
    assert made.status_code == 201 and made["Cache-Control"] == "no-store"
    trigger = Trigger.objects.get()
    assert (trigger.name, trigger.prompt, trigger.enabled, trigger.owner) == (
        "Triage",
        "Triage this: {{payload}}",
        True,
        alice,
    )
    page = made.content.decode()
    secret = page.split('id="trigger-new-secret" class="token-value" type="text" value="')[1].split('"')[0]
    assert secret.startswith("hk_") and bearer_holds(trigger, secret)
    assert f"http://testserver/hooks/{trigger.pk}/" in page
    assert 'data-page-url="/schedules/triggers/"' in page  # a reload reads the list, not the POST
    listed = api.get("/schedules/triggers/").content.decode()
    assert "Triage" in listed and f"/hooks/{trigger.pk}/" in listed
    assert secret not in listed  # never again
    assert f'href="?edit={trigger.pk}"' in listed
    assert "Triage this: {{payload}}" in api.get(f"/schedules/triggers/?edit={trigger.pk}").content.decode()
    edited = api.post(
        "/schedules/triggers/",
        {"id": str(trigger.pk), "name": "Triage", "prompt": "New ticket: {{payload}}", "agent": "default"},
    )
    assert edited.status_code == 302
    trigger.refresh_from_db()
    assert (trigger.prompt, trigger.enabled) == ("New ticket: {{payload}}", False)
    assert bearer_holds(trigger, secret)  # an edit keeps the secret
    assert api.post(f"/schedules/triggers/{trigger.pk}/toggle/").status_code == 302
    trigger.refresh_from_db()
    assert trigger.enabled
    api.post(f"/schedules/triggers/{trigger.pk}/toggle/")
    trigger.refresh_from_db()
    assert not trigger.enabled
    assert "disabled" in api.get("/schedules/triggers/").content.decode()
    assert api.post(f"/schedules/triggers/{trigger.pk}/delete/").status_code == 302
    assert not Trigger.objects.exists()


def test_a_refused_form_says_why_and_stores_nothing(api):
    response = api.post("/schedules/triggers/", {"prompt": "no placeholder", "agent": "default"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "prompt must contain {{payload}}" in page and "no placeholder" in page
    assert "trigger-new-secret" not in page
    response = api.post("/schedules/triggers/", {"prompt": "{{payload}}", "agent": "nobody-has-this"})
    assert response.status_code == 400 and "agent must be" in response.content.decode()
    assert not Trigger.objects.exists()


def test_another_users_trigger_is_out_of_reach(api, make_user):
    bob = make_user("bob")
    theirs, _ = trigger_create(user=bob, body={"prompt": "bob's {{payload}}", "name": "Bob's"})
    assert "Bob&#x27;s" not in api.get("/schedules/triggers/").content.decode()
    assert "bob&#x27;s" not in api.get(f"/schedules/triggers/?edit={theirs.pk}").content.decode()
    api.post(f"/schedules/triggers/{theirs.pk}/toggle/")
    api.post(f"/schedules/triggers/{theirs.pk}/delete/")
    theirs.refresh_from_db()
    assert theirs.enabled
    assert api.get("/schedules/triggers/?edit=nonsense").status_code == 200


def test_the_schedules_page_and_the_triggers_page_link_to_each_other(api):
    assert 'href="/schedules/triggers/"' in api.get("/schedules/").content.decode()
    assert 'href="/schedules/"' in api.get("/schedules/triggers/").content.decode()
