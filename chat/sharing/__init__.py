"""Shared links (docs/protocol.md, "Shared links"): read-only snapshots of a conversation at
`/s/<token>/`, made, listed and revoked by its owner, copied by any signed-in visitor."""
