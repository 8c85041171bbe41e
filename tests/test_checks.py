"""System checks of the agent settings (chat/checks.py)."""

from __future__ import annotations

import pytest

from chat.accounts.budgets import reserve_setting, run_reserve
from chat.checks import check_agent_settings, check_oidc


@pytest.fixture
def good(settings):
    settings.AGENT_MODEL = "demo"
    settings.AGENT_TOOLS = ["calculator", "current_time"]
    settings.AGENT_MAX_RETRIES = 3
    settings.AGENT_RETRY_INTERVAL = 10.0
    settings.AGENT_MAX_ITERATIONS = 10
    settings.AGENT_MAX_MESSAGE_CHARS = 32000
    settings.AGENT_STREAM_FLUSH_MS = 50
    settings.AGENT_STREAM_FLUSH_MAX_MS = 500
    settings.AGENT_MAX_RESUMES = 1
    settings.AGENT_TEMPERATURE = None
    settings.AGENT_MAX_TOKENS = None
    settings.AGENT_TOP_P = None
    return settings


def ids(errors):
    return [e.id for e in errors]


def test_good_settings_pass(good):
    assert check_agent_settings(None) == []


def test_unknown_tool_name(good):
    good.AGENT_TOOLS = ["calculator", "teleport", "time_machine"]
    (error,) = check_agent_settings(None)
    assert error.id == "agentsite.E002"
    assert error.msg == "AGENT_TOOLS names unknown tools: teleport, time_machine."
    assert "calculator" in error.hint and "current_time" in error.hint


def test_model_missing_when_a_key_is_set(good):
    good.AGENT_MODEL = None
    assert ids(check_agent_settings(None)) == ["agentsite.E001"]


@pytest.mark.parametrize(
    ("name", "value", "minimum"),
    [
        ("AGENT_MAX_RETRIES", -1, 0),
        ("AGENT_RETRY_INTERVAL", -0.5, 0),
        ("AGENT_MAX_ITERATIONS", 0, 1),
        ("AGENT_MAX_MESSAGE_CHARS", 0, 1),
        ("AGENT_STREAM_FLUSH_MS", -10, 0),
        ("AGENT_STREAM_FLUSH_MAX_MS", -1, 0),
        ("AGENT_MAX_RESUMES", -1, 0),
        ("AGENT_MCP_SESSION_IDLE", 0, 1),
    ],
)
def test_bad_numbers(good, name, value, minimum):
    setattr(good, name, value)
    (error,) = check_agent_settings(None)
    assert error.id == "agentsite.E003"
    assert error.msg == f"{name} must be at least {minimum}, not {value}."


@pytest.mark.parametrize("name", ["AGENT_TEMPERATURE", "AGENT_MAX_TOKENS", "AGENT_TOP_P"])
def test_model_options_must_be_numbers(good, name):
    setattr(good, name, "warm")
    (error,) = check_agent_settings(None)
    assert error.id == "agentsite.E004" and name in error.msg
    setattr(good, name, "0.7")
    assert check_agent_settings(None) == []


def test_several_problems_are_all_reported(good):
    good.AGENT_TOOLS = ["nope"]
    good.AGENT_MAX_ITERATIONS = 0
    good.AGENT_TOP_P = "x"
    assert ids(check_agent_settings(None)) == ["agentsite.E002", "agentsite.E003", "agentsite.E004"]


def test_approval_settings(settings):
    from chat.checks import check_approvals

    settings.AGENT_APPROVAL_TOOLS = ["bash", "github__*"]
    settings.AGENT_APPROVAL_TIMEOUT = 600.0
    assert check_approvals(None) == []
    settings.AGENT_APPROVAL_TOOLS = ["bash", "no spaces"]
    settings.AGENT_APPROVAL_TIMEOUT = 0.0
    assert ids(check_approvals(None)) == ["agentsite.E003", "agentsite.W013"]


@pytest.fixture
def oidc(settings):
    settings.OIDC_ISSUER, settings.OIDC_CLIENT_ID, settings.OIDC_CLIENT_SECRET = "https://id.test", "site", "s"
    settings.OIDC_ENABLED = True
    settings.ALLOW_PASSWORD_LOGIN = True
    return settings


def test_oidc_configured_passes(oidc):
    assert check_oidc(None) == []
    oidc.ALLOW_PASSWORD_LOGIN = False
    assert check_oidc(None) == []


def test_oidc_half_configured(oidc):
    oidc.OIDC_CLIENT_SECRET = None
    oidc.OIDC_ENABLED = False
    (error,) = check_oidc(None)
    assert error.id == "agentsite.E040"
    assert "OIDC_CLIENT_SECRET not set" in error.msg


def test_oidc_issuer_not_a_url(oidc):
    oidc.OIDC_ISSUER = "id.test/realms/x"
    assert ids(check_oidc(None)) == ["agentsite.E041"]


def test_no_way_to_sign_in(oidc):
    oidc.OIDC_ISSUER, oidc.OIDC_CLIENT_ID, oidc.OIDC_CLIENT_SECRET, oidc.OIDC_ENABLED = "", None, None, False
    assert check_oidc(None) == []
    oidc.ALLOW_PASSWORD_LOGIN = False
    assert ids(check_oidc(None)) == ["agentsite.E042"]


def test_the_image_box_must_be_width_x_height(good):
    good.AGENT_IMAGE_MAX_PIXELS = "1568"
    [error] = check_agent_settings(None)
    assert error.id == "agentsite.E006" and "WIDTHxHEIGHT" in error.msg
    good.AGENT_IMAGE_MAX_PIXELS = "1024x768"
    assert check_agent_settings(None) == []


def test_the_time_zone_and_the_run_reserve_must_be_usable(good):
    good.TIME_ZONE = "Mars/Olympus"
    [error] = check_agent_settings(None)
    assert error.id == "agentsite.E007" and "Mars/Olympus" in error.msg
    good.TIME_ZONE = "Asia/Kolkata"
    for bad in ("0", "-5", "1.5", "1e3", "lots", "²", "١٠", "00", True):
        good.AGENT_RUN_TOKEN_RESERVE = bad
        [error] = check_agent_settings(None)
        assert error.id == "agentsite.E008" and "AGENT_RUN_TOKEN_RESERVE" in error.msg and repr(bad) in error.msg
        assert "4096" in error.hint
    for fine in ("2048", 2048):
        good.AGENT_RUN_TOKEN_RESERVE = fine
        assert check_agent_settings(None) == []


def test_the_run_reserve_is_read_as_checked(settings):
    settings.AGENT_RUN_TOKEN_RESERVE = " 300 "
    assert run_reserve(profile_max_tokens=50) == 300
    settings.AGENT_RUN_TOKEN_RESERVE = None
    assert run_reserve(profile_max_tokens=50) == 50
    for bad in ("²", "1.5", "0"):
        with pytest.raises(ValueError, match="whole number|above 0"):
            reserve_setting(bad)
