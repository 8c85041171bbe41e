"""bench/model_tls.py end to end, a few calls: the project's model client, built as the server
builds it, trusts the throwaway CA through SSL_CERT_FILE, keeps its connection for the warm
calls and opens one per call for the new ones; the figures make the doc's table."""

from __future__ import annotations

from bench import docs, model_tls
from bench.server import FakeModel

from .test_docs import RUN


async def test_warm_calls_reuse_one_connection_and_new_ones_open_their_own():
    model = FakeModel()
    try:
        result = await model_tls.measure(model, calls=model_tls.ROUNDS)
    finally:
        model.stop()
    assert "error" not in result, result.get("error")
    assert result["calls"] == model_tls.ROUNDS
    for endpoint in ("tls", "plain"):
        assert result[endpoint]["warm"]["connections_opened"] == 0
        assert result[endpoint]["new"]["connections_opened"] == model_tls.ROUNDS
        assert result[endpoint]["new"]["first_text_ms"]["n"] == model_tls.ROUNDS
    table = docs.render("model-tls", docs.take({"run": RUN, "model_tls": result})["model-tls"])
    assert f"| new for each call (a client each) | {result['tls']['new']['first_text_ms']['p50']:.1f} / " in table
