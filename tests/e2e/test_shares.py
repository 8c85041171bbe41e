"""Shared links through a real daphne (docs/protocol.md, "Shared links"): a conversation answered
by the fake model with a tool call is shared; an anonymous visitor reads the snapshot and
nothing else (the conversation's socket, events and files stay closed to them); a signed-in
visitor copies it and continues, and the model's memory of the copy holds the snapshot's turns."""

from __future__ import annotations

import httpx2
import pytest

from tests.fakellm import text_reply, tool_call_reply

from .harness import Client, anonymous_socket, events_only
from .test_isolation import refusal

pytestmark = pytest.mark.services


async def test_share_read_anonymously_then_copy_and_continue(server, user, replies, e2e_llm):
    question = replies.set(
        "What is 6*7? Use the calculator.",
        tool_call_reply(("calculator", {"expression": "6*7"})),
        text_reply("It is 42, the calculator says.", thinking="The calculator is exact."),
    )
    conversation = await user.create_conversation("to share")
    sock = await user.socket(conversation)
    await sock.sync()
    await sock.message(question)
    await sock.until_complete()
    await sock.close()

    made = await user.api("POST", f"/api/conversations/{conversation}/shares/", json_body={"expiresInDays": 7})
    assert made.status_code == 201, made.text
    url = made.json()["url"]

    async with httpx2.AsyncClient(base_url=server.base, timeout=20) as anonymous:
        page = await anonymous.get(url)
        assert page.status_code == 200 and "script-src 'self'" in page.headers["content-security-policy"]
        shared = (await anonymous.get(f"{url}events/")).json()
        kinds = [e["type"] for e in shared["events"]]
        assert shared["conversation"] == {"title": "to share"}
        assert kinds[0] == "user_message" and "tool_end" in kinds and "thinking" in kinds and kinds[-1] == "complete"
        # The link opens nothing of the conversation itself.
        for path in ("", "events/", "files/", "files/anything.txt", "shares/"):
            assert (await anonymous.get(f"/api/conversations/{conversation}/{path}")).status_code == 401
        # Copying needs a signed-in user.
        assert (await anonymous.post(f"{url}copy/")).status_code in (401, 403)
    how = await refusal(lambda: anonymous_socket(server, f"/ws/chat/{conversation}/"))
    assert how in {("close", 4401), ("handshake", 403)}, how

    visitor = await Client(server).signup()
    try:
        # A visitor with the link still has no access to the owner's conversation.
        assert (await visitor.api("GET", f"/api/conversations/{conversation}/events/")).status_code == 404
        assert (await visitor.api("GET", f"/api/conversations/{conversation}/files/")).status_code == 404
        copied = await visitor.api("POST", f"{url}copy/")
        assert copied.status_code == 201, copied.text
        copy_id = copied.json()["id"]
        assert copy_id != conversation
        listed = (await visitor.api("GET", "/api/conversations/")).json()["conversations"]
        assert [c["id"] for c in listed] == [copy_id] and listed[0]["title"] == "to share (shared)"
        before = await visitor.events(copy_id)
        assert [e["type"] for e in before] == kinds

        follow_up = replies.set("And doubled?", text_reply("84."))
        e2e_llm.requests.clear()
        sock = await visitor.socket(copy_id)
        await sock.sync()
        await sock.message(follow_up)
        frames = events_only(await sock.until_complete())
        await sock.close()
        assert frames[-1]["status"] == "succeeded" and "84." in "".join(
            f["content"] for f in frames if f["type"] == "text"
        )
        # The model was sent the snapshot's turns: the question, the tool call and its result, the answer.
        messages = e2e_llm.requests[-1]["messages"]
        contents = [str(m.get("content")) for m in messages]
        assert question in contents and "And doubled?" in contents
        assert any(m.get("role") == "tool" and "42" in str(m.get("content")) for m in messages)
        assert any("It is 42, the calculator says." in c for c in contents)
        # The owner's conversation is untouched by the copy's run.
        assert len(await user.events(conversation)) == len(kinds)
    finally:
        await visitor.aclose()
