"""chat.http_urls: the one check of a URL an operator configures (an agent's endpoint, an MCP
server, the OpenID provider), and the three places that use it saying the same."""

from __future__ import annotations

import pytest
from django.core.checks import run_checks

from chat.http_urls import http_url_problem


@pytest.mark.parametrize(
    "url", ["http://localhost:8080/v1", "https://api.example.com", "https://[::1]:443/mcp", "http://10.0.0.2/"]
)
def test_http_and_https_urls_with_a_host_pass(url):
    assert http_url_problem(url) is None


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("ftp://files.example.com/", "not an http:// or https:// URL with a host"),
        ("https://", "not an http:// or https:// URL with a host"),
        ("example.com/v1", "not an http:// or https:// URL with a host"),
        ("http://host:99999/", "not a valid URL: Port out of range 0-65535"),
        ("http://[::1/", "not a valid URL: Invalid IPv6 URL"),
    ],
)
def test_anything_else_says_why(url, problem):
    assert http_url_problem(url) == problem


def test_the_issuer_check_uses_it(settings):
    """An issuer with a port that is none passed the old pattern-only check; now it is E041."""
    settings.OIDC_ISSUER = "https://id.example.com:99999/realms/acme"
    settings.OIDC_CLIENT_ID, settings.OIDC_CLIENT_SECRET = "id", "secret"
    assert "agentsite.E041" in [error.id for error in run_checks()]
    settings.OIDC_ISSUER = "https://id.example.com/realms/acme"
    assert "agentsite.E041" not in [error.id for error in run_checks()]
