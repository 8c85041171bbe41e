"""The log an operator reads under `make run` (daphne with the project's LOGGING): every line
printed once, and nothing a user does, such as deleting a conversation that never had files or
uploading a broken PDF, writes an ERROR or a traceback."""

from __future__ import annotations

import re

import pytest

from .harness import Client, Server, server_env


@pytest.mark.timeout(400)  # room for a daphne start-up on a loaded machine (the default is 120 s)
async def test_each_line_is_printed_once_and_user_actions_log_no_traceback(databases, e2e_llm, log_dir, tmp_path):
    env = server_env(
        database_url=databases.new(),
        llm_base_url=e2e_llm.base_url,
        AGENT_WORKSPACE_ROOT=str(tmp_path / "not-yet-made"),  # a fresh install: no workspace written yet
        AGENT_MAX_UPLOAD_BYTES="1000",
    )
    server = Server(env, log_dir=log_dir, name="logs")
    server.start(timeout=120)  # a start-up on a loaded machine can take longer than the harness's usual wait
    client = await Client(server).signup()
    try:
        never_had_files = await client.create_conversation("empty")
        assert (await client.api("DELETE", f"/api/conversations/{never_had_files}/")).status_code == 204
        with_files = await client.create_conversation("files")
        upload = f"/api/conversations/{with_files}/files/"
        headers = client._unsafe_headers()
        broken = await client.http.post(
            client.url(upload), files={"file": ("broken.pdf", b"%PDF-1.4 not really")}, headers=headers
        )
        assert broken.status_code == 201
        too_large = await client.http.post(
            client.url(upload), files={"file": ("big.bin", b"x" * 1001)}, headers=headers
        )
        assert too_large.status_code == 413
    finally:
        await client.aclose()
        server.stop()
    log = server.log(tail=None)
    lines = log.splitlines()
    # chat's warning and django's request warning, each once and in the project's format
    (pdf,) = [line for line in lines if "could not extract the text of broken.pdf" in line]
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ WARNING chat\.conversations\.uploads: ", pdf), pdf
    (request,) = [line for line in lines if "Request Entity Too Large" in line]
    assert " WARNING django.request: " in request
    # daphne's own lines go through the same one handler
    assert any(re.search(r" INFO daphne\.\S+: Listening on TCP address", line) for line in lines), log
    assert "Traceback" not in log and " ERROR " not in log, log
