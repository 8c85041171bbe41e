"""The official a2a-sdk client against a real daphne (docs/protocol.md, "A2A agent"): a user with
an API token, a client per agent built from its card, and the messages and reads the tests send."""

from __future__ import annotations

import uuid

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageConfiguration, SendMessageRequest, StreamResponse

from .harness import Client as User


async def token_of(user: User, name: str = "a2a") -> str:
    r = await user.api("POST", "/api/tokens/", json_body={"name": name})
    assert r.status_code == 201, r.text
    return r.json()["token"]


class Agent:
    """One agent's A2A client with one token (`streaming`: sends SendStreamingMessage)."""

    def __init__(self, http: httpx.AsyncClient, client: Client):
        self.http, self.client = http, client

    @classmethod
    async def of(cls, base: str, token: str, slug: str = "default", *, streaming: bool = False) -> Agent:
        http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
        card = await A2ACardResolver(http, f"{base}/a2a/{slug}").get_agent_card()
        return cls(http, ClientFactory(ClientConfig(httpx_client=http, streaming=streaming)).create(card))

    async def aclose(self) -> None:
        await self.client.close()
        await self.http.aclose()

    async def send(self, text: str = "", **fields) -> list[StreamResponse]:
        return [event async for event in self.client.send_message(request(text, **fields))]


def request(
    text: str = "", *, context_id: str = "", task_id: str = "", parts: list[Part] | None = None, **config
) -> SendMessageRequest:
    message = Message(
        message_id=str(uuid.uuid4()),
        role=Role.ROLE_USER,
        parts=parts if parts is not None else [Part(text=text)],
        context_id=context_id,
        task_id=task_id,
    )
    return SendMessageRequest(message=message, configuration=SendMessageConfiguration(**config))


def answer_of(task) -> str:
    return "".join(part.text for artifact in task.artifacts for part in artifact.parts)


def streamed_answer(events: list[StreamResponse], start: str = "") -> str:
    """The answer a stream's artifact chunks make, after `start` (a snapshot's)."""
    text = start
    for event in events:
        if event.HasField("artifact_update"):
            update = event.artifact_update
            piece = "".join(part.text for part in update.artifact.parts)
            text = text + piece if update.append else piece
    return text
