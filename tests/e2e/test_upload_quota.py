"""The workspace quota holds across server processes: parallel uploads into one conversation through
two daphnes on one PostgreSQL database never store more than the quota (chat/workspace_lock.py)."""

from __future__ import annotations

import asyncio
import os

import pytest

from chat.tools.confine import tree_size, workspace_path

from .conftest import ON_POSTGRES, REDIS_URL
from .harness import Client, Server, server_env

pytestmark = [
    pytest.mark.multiprocess,
    # Room for a migrated database and two daphne start-ups on a loaded machine (the default is 120 s).
    pytest.mark.timeout(400),
    pytest.mark.skipif(not (ON_POSTGRES and REDIS_URL), reason="needs DATABASE_URL=postgres://... and REDIS_URL"),
]

FOLDERS, PER_FOLDER = 40, 50  # small files that make measuring the workspace take a moment
UPLOAD = 100_000


async def test_parallel_uploads_through_two_servers_keep_the_quota(databases, e2e_llm, log_dir, tmp_path):
    root = tmp_path / "workspaces"
    root.mkdir()
    small = FOLDERS * PER_FOLDER
    quota = small + 4 * UPLOAD
    database = databases.new()
    env = server_env(
        database_url=database,
        llm_base_url=e2e_llm.base_url,
        redis_url=REDIS_URL,
        AGENT_WORKSPACE_ROOT=str(root),
        AGENT_WORKSPACE_MAX_BYTES=str(quota),
    )
    server_a, server_b = Server(env, log_dir=log_dir, name="quota-A"), Server(env, log_dir=log_dir, name="quota-B")
    client = None
    try:
        # Started together, and with a longer wait than the harness's: a loaded machine is slow to start them.
        await asyncio.gather(*(asyncio.to_thread(server.start, 100) for server in (server_a, server_b)))
        client = await Client(server_a).signup()
        conversation = await client.create_conversation("quota")
        workspace = workspace_path(root, conversation)
        for folder in range(FOLDERS):
            (workspace / f"work{folder:02d}").mkdir(parents=True)
            for n in range(PER_FOLDER):
                (workspace / f"work{folder:02d}" / f"{n}.txt").write_bytes(b"x")

        async def put(number: int) -> int:
            server = server_a if number % 2 else server_b
            response = await client.http.post(
                client.url(f"/api/conversations/{conversation}/files/", server),
                files={"file": (f"part{number:02d}.bin", b"u" * UPLOAD)},
                headers=client._unsafe_headers(server),
            )
            return response.status_code

        codes = await asyncio.gather(*(put(number) for number in range(12)))
        assert sorted(codes) == [201] * 4 + [413] * 8, codes
        assert tree_size(workspace) == quota
        assert len([name for name in os.listdir(workspace) if name.startswith("part")]) == 4
        for server in (server_a, server_b):
            assert "Traceback" not in server.log(tail=None)
    finally:
        if client is not None:
            await client.aclose()
        server_a.stop()
        server_b.stop()
