"""Data set-up and row counts, run inside the server's Django settings in a subprocess.

`python -m bench.seed` reads one JSON command on stdin and prints JSON:

- {"op": "users", "count": N, "conversations": M}: N users with M conversations each,
  and a logged-in session per user. Users are bulk-created with unusable passwords
  and sessions are written straight to the session store, exactly as
  django.contrib.auth.login() would fill them: signup and login through the forms
  hash a password each (~0.3 s), which would make set-up dominate the run. The
  login form itself is covered by the tests.
- {"op": "replay", "events": N}: one more user with one conversation holding a
  finished run of N events (user_message, text deltas, complete).
- {"op": "history", "conversations": [...], "events": K}: a finished run of K events
  (user_message, text deltas, complete) in each of those conversations, so that a socket
  reconnecting with `after` reads from a conversation with a past, as a real one has.
- {"op": "delegates", "conversations": [...]}: a child agent profile and a parent profile that
  may delegate to it (both on the server's model, open to everyone), the parent made the agent
  of those conversations; prints both slugs.
- {"op": "budget", "conversations": [...], "tokens": N}: a daily token budget of N for each of
  those conversations' owners.
- {"op": "count", "conversations": [...]}: rows in the event, run and tool record
  tables for those conversations, and the number of text tokens they stored.
- {"op": "storage", "conversations": [...]}: `count`, the bytes of the text those
  events hold, and the bytes the event table and its indexes use (SQLite's
  dbstat, the whole table: run it on a database holding only those runs).
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from importlib import import_module


def setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentsite.settings")
    import django

    django.setup()


def session_for(user) -> str:
    """A logged-in session of the user, as django.contrib.auth.login() would fill it."""
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY

    # The configured engine (Django's own pattern), whose rows the server's sockets read.
    session = import_module(settings.SESSION_ENGINE).SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return session.session_key


def users(count: int, conversations: int) -> dict:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.db import transaction

    from chat.models import Conversation

    User = get_user_model()
    tag = uuid.uuid4().hex[:8]
    unusable = make_password(None)
    with transaction.atomic():
        created = User.objects.bulk_create(User(username=f"bench-{tag}-{i}", password=unusable) for i in range(count))
        if created[0].pk is None:  # backends without RETURNING
            created = list(User.objects.filter(username__startswith=f"bench-{tag}-").order_by("id"))
        convs = [Conversation(owner=user, title="bench") for user in created for _ in range(conversations)]
        Conversation.objects.bulk_create(convs)
        out = []
        for index, user in enumerate(created):
            mine = convs[index * conversations : (index + 1) * conversations]
            out.append({"session": session_for(user), "conversations": [str(c.pk) for c in mine]})
    return {"users": out}


def replay(events: int) -> dict:
    from django.utils import timezone

    from chat.models import Event, Run

    user = users(1, 1)["users"][0]
    conversation_id = user["conversations"][0]
    from chat.models import Conversation

    conversation = Conversation.objects.get(pk=conversation_id)
    run = Run.objects.create(
        conversation=conversation,
        user=conversation.owner,
        model="fake-model",
        status=Run.Status.SUCCEEDED,
        finished_at=timezone.now(),
    )
    now = timezone.now()
    payloads = [{"type": "user_message", "content": "bench replay"}]
    payloads += [{"type": "text", "content": f"token {i} of a long answer, coalesced. "} for i in range(events - 2)]
    payloads.append({"type": "complete", "status": "succeeded"})
    Event.objects.bulk_create(
        (
            Event(conversation=conversation, run=run, seq=i + 1, type=p["type"], payload=p, created_at=now)
            for i, p in enumerate(payloads)
        ),
        batch_size=2000,
    )
    Conversation.objects.filter(pk=conversation.pk).update(last_seq=events)
    return {"session": user["session"], "conversation": conversation_id}


def history(conversations: list[str], events: int) -> dict:
    from django.db import transaction
    from django.utils import timezone

    from chat.models import Conversation, Event, Run

    now = timezone.now()
    payloads = [{"type": "user_message", "content": "bench history"}]
    payloads += [{"type": "text", "content": f"part {i} of an answer. "} for i in range(events - 2)]
    payloads.append({"type": "complete", "status": "succeeded"})
    with transaction.atomic():
        found = list(Conversation.objects.filter(pk__in=conversations))
        runs = Run.objects.bulk_create(
            Run(
                conversation=c,
                user_id=c.owner_id,
                model="fake-model",
                status=Run.Status.SUCCEEDED,
                finished_at=now,
            )
            for c in found
        )
        Event.objects.bulk_create(
            (
                Event(conversation=c, run=run, seq=i + 1, type=p["type"], payload=p, created_at=now)
                for c, run in zip(found, runs)
                for i, p in enumerate(payloads)
            ),
            batch_size=2000,
        )
        Conversation.objects.filter(pk__in=[c.pk for c in found]).update(last_seq=events)
    return {"conversations": len(found), "last_seq": events}


def delegates(conversations: list[str]) -> dict:
    from chat.models import AgentProfile, Conversation

    tag = uuid.uuid4().hex[:8]
    child = AgentProfile.objects.create(
        slug=f"bench-child-{tag}", name="bench child", model="fake-model", everyone=True
    )
    parent = AgentProfile.objects.create(
        slug=f"bench-parent-{tag}", name="bench parent", model="fake-model", everyone=True
    )
    parent.delegates.add(child)
    Conversation.objects.filter(pk__in=conversations).update(agent=parent)
    return {"parent": parent.slug, "child": child.slug}


def budget(conversations: list[str], tokens: int) -> dict:
    from chat.models import Budget, Conversation

    owners = set(Conversation.objects.filter(pk__in=conversations).values_list("owner_id", flat=True))
    Budget.objects.bulk_create(Budget(scope="user", user_id=owner, period="day", tokens=tokens) for owner in owners)
    return {"budgets": len(owners)}


def count(conversations: list[str]) -> dict:
    from chat.models import Event, Run, ToolRecord

    events = Event.objects.filter(conversation_id__in=conversations)
    tokens = 0
    for content in events.filter(type="text").values_list("payload__content", flat=True):
        tokens += len(content.split())
    return {
        "events": events.count(),
        "text_events": events.filter(type="text").count(),
        "runs": Run.objects.filter(conversation_id__in=conversations).count(),
        "tool_records": ToolRecord.objects.filter(run__conversation_id__in=conversations).count(),
        "tokens": tokens,
    }


def storage(conversations: list[str]) -> dict:
    from django.db import connection

    from chat.models import Event

    texts = Event.objects.filter(conversation_id__in=conversations, type="text").values_list(
        "payload__content", flat=True
    )
    table = Event._meta.db_table
    with connection.cursor() as cursor:
        # Bytes in use (pages less their free space) of the table and each of its indexes.
        cursor.execute(
            "SELECT name, SUM(pgsize - unused) FROM dbstat WHERE name = %s OR name IN "
            "(SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = %s) GROUP BY name",
            [table, table],
        )
        used = dict(cursor.fetchall())
    return count(conversations) | {
        "text_bytes": sum(len(text.encode()) for text in texts),
        "table_bytes": used.pop(table),
        "index_bytes": used,
    }


def main() -> None:
    command = json.loads(sys.stdin.read())
    setup()
    op = command.pop("op")
    ops = {"users": users, "replay": replay, "history": history, "count": count, "storage": storage}
    ops |= {"delegates": delegates, "budget": budget}
    result = ops[op](**command)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
