"""The Chainlit peer of `python -m bench --only peers`, run by `chainlit run` in .venv-chainlit
(`make peers`), never imported by the project.

What Chainlit's documentation shows for an OpenAI stream: on each user message, the openai SDK's
typed `create(stream=True)` and every delta handed to `cl.Message.stream_token`, then `send()`.
With BENCH_CHAINLIT_DATABASE (a SQLite file with bench/peers/chainlit_stack.py's schema) it runs
with Chainlit's SQLAlchemy data layer on it (through aiosqlite) and a password sign-in, since
Chainlit keeps a thread's history only for a signed-in user (docs.chainlit.io, "Data Persistence").

    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 chainlit run bench/peers/chainlit_app.py --headless
"""

from __future__ import annotations

import os

import chainlit as cl
import openai
from chainlit.data.sql_alchemy import SQLAlchemyDataLayer

PASSWORD = "bench"
DATABASE = os.environ.get("BENCH_CHAINLIT_DATABASE")

# One SDK client per process (its connection pool shared by every socket), as in the relay.
client = openai.AsyncOpenAI(
    base_url=os.environ.get("OPENAI_BASE_URL"), api_key=os.environ.get("OPENAI_API_KEY", "x"), max_retries=0
)


@cl.on_message
async def on_message(message: cl.Message) -> None:
    reply = cl.Message(content="")
    stream = await client.chat.completions.create(
        model="fake-model", messages=[{"role": "user", "content": message.content}], stream=True
    )
    async for chunk in stream:
        for choice in chunk.choices:
            if choice.delta.content:
                await reply.stream_token(choice.delta.content)
    await reply.send()


if DATABASE:

    @cl.data_layer
    def data_layer() -> SQLAlchemyDataLayer:
        return SQLAlchemyDataLayer(conninfo=f"sqlite+aiosqlite:///{DATABASE}")

    @cl.password_auth_callback
    def sign_in(username: str, password: str) -> cl.User | None:
        return cl.User(identifier=username) if password == PASSWORD else None
