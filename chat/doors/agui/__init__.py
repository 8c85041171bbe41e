"""The AG-UI door (docs/protocol.md, "AG-UI")."""
