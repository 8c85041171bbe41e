"""What a user writes over HTTP, outside a run: conversations (services.py) and their reads
(selectors.py, paging.py), import and export (importing.py, export.py), uploads and the
per-conversation workspace (uploads.py, workspaces.py). See docs/architecture.md,
"conversations/"."""
