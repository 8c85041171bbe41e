"""Notifications (docs/protocol.md, "Notifications"): what happened while nobody watched, told to
its owner, stored and pushed live to the owner's bell sockets on every process.

- services.py  made (once per run event), read, marked read; the notification object
- push.py      the user's bell group and what is pushed to it through the channel layer
- runs.py      a run's `complete` and `approval_request` looked at as they are published: notify
               when a schedule or trigger started the run, or nobody watches its conversation
"""
