"""`python -m bench --only model-tls` (in the default run): the first token of a model call over
TLS, on a warm pooled connection against a new connection each call, and the same over plain
HTTP for reference.

The fake model (bench/fakemodel.py) serves HTTPS with a certificate of a throwaway CA (trustme),
in its own process beside the suite's plain-HTTP one. The client is the project's own: a Django
process builds it as the server does
(chat.runtime.build.build_chat_model, the SDK's aiohttp transport; bench/model_tls_client.py) with the endpoint's URL and
`SSL_CERT_FILE` naming the CA's certificate (the transport's SSL context reads it), and times
each call from `ChatModel.stream()` to its first text. Calls go one after the other in rounds,
each round taking every variant in turn:

- warm: one client; a first call opens the connection, the round's calls reuse it;
- new: a client of its own per call (`close_client()` after it), so each call opens a
  connection (TCP, and for https the TLS handshake) before its request.

The fake model's count of the connections it accepted, read before and after each variant's
calls, shows the reuse (warm: none opened; new: one per call).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid

import trustme

from .server import ROOT, FakeModel

CALLS = 50
ROUNDS = 5
TOKENS = 5
VARIANTS = ("warm", "new")


def _child_env(tmp: str, ca_file: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENT_", "OPENAI_", "DATABASE_", "SSL_CERT"))}
    env.update(
        DJANGO_SETTINGS_MODULE="agentsite.settings",
        DATABASE_URL=f"sqlite:///{os.path.join(tmp, 'db.sqlite3')}",  # never opened: no call reads it
        SECRET_KEY="bench-" + uuid.uuid4().hex,
        AGENT_MODEL="fake-model",
        OPENAI_API_KEY="x",
        SSL_CERT_FILE=ca_file,
    )
    return env


async def measure(model: FakeModel, *, calls: int = CALLS) -> dict:
    """`model`: the suite's plain-HTTP fake model; a TLS one is started beside it."""
    tmp = tempfile.mkdtemp(prefix="agentsite-bench-tls-")
    tls_model = None
    try:
        ca = trustme.CA()
        cert = ca.issue_cert("127.0.0.1")
        paths = {name: os.path.join(tmp, f"{name}.pem") for name in ("ca", "cert", "key")}
        ca.cert_pem.write_to_path(paths["ca"])
        cert.cert_chain_pems[0].write_to_path(paths["cert"])
        cert.private_key_pem.write_to_path(paths["key"])
        tls_model = FakeModel(tls=(paths["cert"], paths["key"]))
        command = {"endpoints": {"tls": tls_model.base_url, "plain": model.base_url}, "calls": calls}
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "bench.model_tls_client"],
            cwd=ROOT,
            env=_child_env(tmp, paths["ca"]),
            input=json.dumps(command),
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            return {"error": f"the client process failed:\n{done.stderr[-3000:]}"}
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        if tls_model is not None:
            tls_model.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def lines(result: dict) -> list[str]:
    out = ["\n== model calls: first text over TLS and plain HTTP, warm connection against a new one =="]
    if "error" in result:
        return out + [f"  FAILED: {result['error']}"]
    out.append(f"  {result['calls']} calls per variant, one after the other, {result['tokens']} tokens each")
    for endpoint in ("tls", "plain"):
        for variant in VARIANTS:
            r = result[endpoint][variant]
            out.append(
                f"  {endpoint:<5} {variant:<4}: first text p50/p95 {r['first_text_ms']['p50']} / "
                f"{r['first_text_ms']['p95']} ms, connections opened {r['connections_opened']}"
            )
    return out
