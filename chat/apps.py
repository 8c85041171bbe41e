from django.apps import AppConfig


class ChatConfig(AppConfig):
    name = "chat"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Deferred to ready(), as Django requires: these modules import the models.
        from chat import checks  # noqa: F401 - registers the system checks
        from chat.realtime import deletion

        # Before chat.ops.metrics' receiver: what it keeps of a deleted conversation's running run
        # is the `cancelled` this one stores.
        deletion.connect_signals()
        from chat.accounts.revocation import connect_signals
        from chat.conversations import workspaces  # noqa: F401 - removes a deleted conversation's workspace
        from chat.doors.socket import origins  # noqa: F401 - registers the origin checks
        from chat.notifications import runs  # noqa: F401 - a run's end or approval unwatched notifies its owner
        from chat.ops import metrics
        from chat.runs import queue  # noqa: F401 - a stored `complete` starts the next waiting message
        from chat.scheduling import deliveries  # noqa: F401 - a schedule's run that ends calls its webhook

        metrics.connect_signals()  # keeps the series of deleted conversations' runs
        connect_signals()
