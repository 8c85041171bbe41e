"""The log's formatter (serving/log_escape.py) as settings.LOGGING configures it: a request's
text in a record's arguments, in a message a library built, or in an exception's message, is
written on the record's one line, escaped; a traceback keeps its own lines; daphne's start-up
line to open and its access log (serving/daphne_log.py)."""

from __future__ import annotations

import io
import logging
import logging.config
from datetime import datetime

import pytest
from django.conf import settings

from serving.daphne_log import LISTENING, DaphneStartupLines, EscapedAccessLog

ATTACK = "x\r\n2099-01-01 00:00:00,000 INFO chat: forged\x1b[31m\x85\u2028\ty"
ESCAPED = "x\\r\\n2099-01-01 00:00:00,000 INFO chat: forged\\x1b[31m\\x85\\u2028\\ty"


@pytest.fixture
def logged():
    """The records of a logger, through the project's own handler config, as written."""
    stream = io.StringIO()
    config = {
        **settings.LOGGING,
        "handlers": {"console": {**settings.LOGGING["handlers"]["console"], "stream": stream}},
    }
    logging.config.dictConfig(config)
    yield logging.getLogger("chat.test"), stream
    logging.config.dictConfig(settings.LOGGING)


def test_arguments_and_built_messages_stay_on_one_line(logged):
    logger, stream = logged
    logger.warning("oidc sign-in failed: %s", ATTACK)
    logger.warning("built by a library: " + ATTACK)
    logger.warning("as repr: %r and %d", ATTACK, 7)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert lines[0].endswith(f"WARNING chat.test: oidc sign-in failed: {ESCAPED}")
    assert lines[1].endswith(f"built by a library: {ESCAPED}")
    assert lines[2].endswith(f"as repr: {ATTACK!r} and 7")  # repr's own escapes, as they are
    assert "\x1b" not in stream.getvalue() and "\u2028" not in stream.getvalue()


def test_an_exceptions_message_is_escaped_and_its_traceback_kept(logged):
    logger, stream = logged
    try:
        try:
            raise KeyError(ATTACK)
        except KeyError as exc:
            raise ValueError(f"bad file name {ATTACK}") from exc
    except ValueError:
        logger.exception("upload of %s failed", ATTACK)
    text = stream.getvalue()
    lines = text.splitlines()
    assert lines[0].endswith(f"ERROR chat.test: upload of {ESCAPED} failed")
    assert f"ValueError: bad file name {ESCAPED}" in lines
    assert any(line.startswith("KeyError: ") and "\\r\\n2099" in line for line in lines)
    assert "The above exception was the direct cause of the following exception:" in lines
    assert lines[1] == "Traceback (most recent call last):"
    assert not [line for line in lines if line.startswith("2099")] and "\x1b" not in text


def test_the_page_to_open_is_a_line_of_its_own(logged):
    _, stream = logged
    daphne = logging.getLogger("daphne.server")
    assert any(isinstance(f, DaphneStartupLines) for f in daphne.filters)
    daphne.info(LISTENING, "0.0.0.0", 8000)
    lines = stream.getvalue().splitlines()
    assert lines[0].endswith("INFO daphne.server: Listening on TCP address 0.0.0.0:8000")
    assert lines[1:] == ["agentsite is ready: open http://127.0.0.1:8000/ in a browser"]


def test_daphnes_access_log_escapes_what_the_client_sent():
    stream = io.StringIO()
    EscapedAccessLog(stream).write_entry(
        host="127.0.0.1:5000", date=datetime(2099, 1, 1), request=f"GET\x1b /p{ATTACK}", status=404, length=9
    )
    assert stream.getvalue() == f'127.0.0.1:5000 - - [01/Jan/2099:00:00:00] "GET\\x1b /p{ESCAPED}" 404 9\n'
