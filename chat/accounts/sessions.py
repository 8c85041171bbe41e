"""The session engine (settings.SESSION_ENGINE): Django's database sessions, each row naming its
user (models.UserSession), the extension Django documents for this. Every save writes it, so a
sign-in, a key cycled by a password change and a session that signs out all keep it right."""

from __future__ import annotations

from django.contrib import auth
from django.contrib.sessions.backends.db import SessionStore as DatabaseSessionStore
from django.core.exceptions import ValidationError

from chat.models import UserSession


class SessionStore(DatabaseSessionStore):
    @classmethod
    def get_model_class(cls):
        return UserSession

    def create_model_instance(self, data):
        session = super().create_model_instance(data)
        try:
            session.user_id = auth.get_user_model()._meta.pk.to_python(data.get(auth.SESSION_KEY))
        except ValidationError:
            session.user_id = None
        return session
