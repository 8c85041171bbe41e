"""Fixtures for the tool tests: a workspace, a ToolContext, and no DNS to the outside world."""

from __future__ import annotations

import pytest

from chat.agent.tools import ToolContext
from chat.tools import netguard
from chat.tools.config import SkillsSettings, ToolSettings

# Names the tests may resolve, and to what. Everything else fails as if it did not exist,
# so that no test can reach the internet through a name.
FAKE_DNS: dict[str, list[str]] = {
    "localhost": ["127.0.0.1", "::1"],
    "evil.example": ["127.0.0.1"],
    "rebind.example": ["93.184.215.14", "10.0.0.5"],
    "metadata.example": ["169.254.169.254"],
    "intranet.example": ["10.1.2.3"],
    "v6-internal.example": ["fd12:3456::1"],
    "public.example": ["93.184.215.14"],
}


@pytest.fixture(autouse=True)
def offline_dns(monkeypatch):
    async def resolve(host: str, port: int) -> list[str]:
        if host.lower().rstrip(".") in FAKE_DNS:
            return FAKE_DNS[host.lower().rstrip(".")]
        raise OSError(f"[test] no such host {host!r} (tests never use real DNS)")

    monkeypatch.setattr(netguard, "resolve", resolve)


@pytest.fixture
def workspace(tmp_path):
    path = tmp_path / "workspace"
    path.mkdir()
    return path


@pytest.fixture
def context(workspace, tmp_path):
    return ToolContext(
        conversation_id="c1",
        user_id="1",
        workspace=workspace,
        settings=ToolSettings(skills=SkillsSettings(skills_dir=tmp_path / "skills")),
    )
