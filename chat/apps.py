from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import (  # noqa: F401 - register the system checks
            checks,
            metrics,  # noqa: F401 - keeps the series of deleted conversations' runs
            origins,
            workspaces,  # noqa: F401 - removes a deleted conversation's workspace
        )
        from .revocation import connect_signals

        connect_signals()
