"""/healthz answers a probe whatever its Host (a Kubernetes probe sends the pod's address);
every other path still refuses a host that ALLOWED_HOSTS does not allow."""

import pytest

from serving.probe_host import allowed_stand_in

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("host", ["10.244.1.17:8000", "127.0.0.1:8000", "[fd00::12]:8000", "evil.example"])
def test_healthz_answers_any_host(client, settings, host):
    settings.ALLOWED_HOSTS = ["chat.example.com"]
    response = client.get("/healthz", HTTP_HOST=host)
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_other_paths_still_refuse_a_host_not_allowed(client, settings):
    settings.ALLOWED_HOSTS = ["chat.example.com"]
    assert client.get("/accounts/login/", HTTP_HOST="10.244.1.17:8000").status_code == 400
    assert client.get("/healthz/", HTTP_HOST="10.244.1.17:8000").status_code == 400
    assert client.post("/healthz", HTTP_HOST="10.244.1.17:8000").status_code == 400
    assert client.get("/accounts/login/", HTTP_HOST="chat.example.com").status_code == 200


def test_the_stand_in_is_a_name_the_setting_allows():
    assert allowed_stand_in(["chat.example.com", "other.example"]) == "chat.example.com"
    assert allowed_stand_in([".example.com"]) == "example.com"
    assert allowed_stand_in(["*"]) == "localhost"
    assert allowed_stand_in([]) is None
