"""The OpenAPI document against the running server (docs/protocol.md, "OpenAPI"): schemathesis loads
`/api/schema/` from a real daphne and sends every operation a bounded number of generated
requests, authenticated with a real personal API token; half of the conversation ids it makes up
are replaced by a conversation the user owns, so the answers of real objects are checked too.
Every answer must be a documented status with a body valid against the schema, and none a 5xx.

It runs in the SQLite pass of `make test` (not marked `services`: once is enough, and it takes
about a minute)."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import ignored_auth, negative_data_rejection, positive_data_acceptance

from .harness import SyncUser

# Every other check of schemathesis runs. `ignored_auth` sends the request again with made-up
# credentials, but the configured bearer header rides along with them, so it would see the real
# token accepted (wrong, revoked and expired tokens: tests/accounts/test_tokens.py).
# `positive_data_acceptance` wants a 2xx for every schema-valid body, and the API refuses some with
# a documented 400 that no schema can express: a `before` cursor not of this list, a `viewed_seq`
# that is not a user_message of this conversation, an export without events.
EXCLUDED = [ignored_auth, positive_data_acceptance]
# A multipart body carries every field as text: a number or an array where the schema says string
# arrives as the string "3" or "[{}, []]", a valid file name, so `negative_data_rejection` would
# want a 400 for what is, on the wire, a valid upload (the file route's own refusals are tested in
# tests/conversations/test_files_attack.py).
EXCLUDED_MULTIPART = [*EXCLUDED, negative_data_rejection]
EXAMPLES = 12  # per operation: ~20 operations, each request a few ms, so the whole test stays ~1 min
# Routes whose real objects must not be fed to generated requests: the stream of a real
# conversation stays open (that is its job), and a DELETE would take the conversation away from
# the operations that follow it.
KEEP_MADE_UP = ("/stream/",)


class Target:
    def __init__(self, base: str, token: str, conversation: str):
        self.base, self.token, self.conversation = base, token, conversation


@pytest.fixture(scope="module")
def target(databases, make_server) -> Target:
    server = make_server(
        databases.new(),
        name="schemathesis",
        AGENT_MESSAGES_PER_MINUTE="100000",
        AGENT_TOOLS="calculator",
        # The negative cases send broken Authorization headers: with the token throttle on, every
        # request after the tenth would be its (documented) 429 and test nothing else.
        LOGIN_FAILURE_LIMIT="0",
    )
    user = SyncUser(server)
    target = Target(server.base, user.token("schemathesis"), user.conversation())
    user.close()
    return target


def owned_half(case, target: Target) -> None:
    """Replace a made-up conversation id by the user's own, and a made-up agent slug by the default
    agent, in about half of the cases (chosen by the generated value itself, so a failing example
    replays the same)."""
    if "slug" in (case.path_parameters or {}) and str(case.path_parameters["slug"])[:1] in "01234567":
        case.path_parameters["slug"] = "default"  # the AG-UI door's real agent, half of the time
    made_up = (case.path_parameters or {}).get("conversation_id")
    if made_up is None or any(part in case.path for part in KEEP_MADE_UP) or case.method.upper() == "DELETE":
        return
    if str(made_up)[:1] in "01234567":
        case.path_parameters["conversation_id"] = target.conversation


def twisted_refused(case, response) -> bool:
    """A multipart body Twisted cannot parse is refused by daphne's HTTP layer (twisted.web.http's
    Request.requestReceived parses every multipart POST first) with a bare 400 before Django
    sees it: no body, no Content-Type, nothing the document can describe or the app can change."""
    multipart = "multipart/form-data" in (case.media_type or "")
    bare = response.status_code == 400 and not response.content and "Content-Type" not in response.headers
    return multipart and bare


def check_operation(operation, mode: GenerationMode, target: Target) -> None:
    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    def run(case):
        owned_half(case, target)
        response = case.call(timeout=30)
        if twisted_refused(case, response):
            return
        multipart = "multipart/form-data" in (case.media_type or "")
        case.validate_response(response, excluded_checks=EXCLUDED_MULTIPART if multipart else EXCLUDED)

    run()


def test_every_answer_is_documented_and_none_is_a_5xx(target):
    """The pytest plugin's lazy loader (schemathesis.pytest.from_fixture) does not work with this
    pytest; the operations are walked here instead, each one's failure collected."""
    loaded = schemathesis.openapi.from_url(f"{target.base}/api/schema/")
    loaded.config.update(base_url=target.base, headers={"Authorization": f"Bearer {target.token}"})
    operations = [result.ok() for result in loaded.get_all_operations()]
    assert len(operations) >= 20
    failures = []
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            try:
                check_operation(operation, mode, target)
            except Unsatisfiable:
                assert mode is GenerationMode.NEGATIVE  # an operation with no input has none to break
            except (Exception, BaseExceptionGroup) as exc:  # every operation's failure is reported at the end
                failures.append(f"{operation.method.upper()} {operation.path} ({mode.value}): {exc}")
    assert not failures, "\n\n".join(failures)
