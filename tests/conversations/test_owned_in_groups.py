"""conversations_owned: the conversation look-ups of a group of requests in one query, each
answered as conversation_owned alone would (another user's and an unknown one are None)."""

from __future__ import annotations

import uuid

import pytest
from django.contrib.auth.models import AnonymousUser

from chat.conversations.selectors import conversation_owned, conversations_owned
from chat.conversations.services import conversation_create

pytestmark = pytest.mark.django_db


def test_a_group_answers_as_each_alone(make_user, django_assert_max_num_queries):
    ada, bob = make_user("ada"), make_user("bob")
    mine, theirs = conversation_create(owner=ada, title="a"), conversation_create(owner=bob, title="b")
    asked = [(ada, mine.pk), (ada, theirs.pk), (bob, theirs.pk), (ada, uuid.uuid4()), (AnonymousUser(), mine.pk)]
    with django_assert_max_num_queries(2):  # one for the group, one for the unknown id
        found = conversations_owned(asked)
    assert found == [mine, None, theirs, None, None]
    assert found == [conversation_owned(user=user, conversation_id=key) for user, key in asked]
    twice = conversations_owned([(ada, mine.pk), (ada, mine.pk)])
    assert twice == [mine, mine] and twice[0] is not twice[1]
