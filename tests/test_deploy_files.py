"""The container image, the compose stack and the Helm chart, checked offline (docs/deployment.md,
"Three ways to run it"). deploy/container/ci-check builds and runs them for real; these are the properties a reader of the
files can see: the image's user, healthcheck, labels and base argument, no secret anywhere, the
stack's services and volumes, the chart rendered and valid for Kubernetes 1.30."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONTAINERFILE = (ROOT / "Containerfile").read_text()
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
COMPOSE_TEXT = (ROOT / "compose.yaml").read_text()


def _chart_check():
    spec = importlib.util.spec_from_file_location("chart_check", ROOT / "deploy" / "helm" / "chart_check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


chart_check = _chart_check()


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of a Containerfile, continuation lines joined, comments left out."""
    joined = re.sub(r"\\\n\s*", " ", "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#")))
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in joined.splitlines() if line.strip()]


STEPS = instructions(CONTAINERFILE)
RUNTIME = STEPS[max(i for i, (op, _) in enumerate(STEPS) if op == "FROM") :]


def test_the_base_is_a_build_argument_with_the_public_python_image_as_default():
    assert STEPS[0] == ("ARG", "BASE_IMAGE=docker.io/library/python:3.11-slim-bookworm")
    froms = [args for op, args in STEPS if op == "FROM"]
    assert len(froms) >= 2, "multi-stage: a build stage and a slim runtime stage"
    assert all(args.startswith("${BASE_IMAGE}") for args in froms)


def test_the_runtime_stage_runs_as_a_numeric_user_on_data():
    ops = dict((op, args) for op, args in RUNTIME)
    assert ops["USER"] == "10001:10001"
    assert ops["EXPOSE"] == "8000" and ops["VOLUME"] == "/data" and ops["WORKDIR"] == "/app"
    env = " ".join(args for op, args in RUNTIME if op == "ENV")
    for baked in (
        "STATIC_ROOT=",
        "AGENT_WORKSPACE_ROOT=/data/workspaces",
        "DATABASE_URL=sqlite:////data/db.sqlite3",
        "PYTHONUNBUFFERED=1",
    ):
        assert baked in env
    assert ops["CMD"] == '["python", "-m", "agentsite.serve"]'  # section 19: agentsite/serve.py
    assert any(op == "RUN" and "collectstatic" in args for op, args in STEPS)


def test_the_healthcheck_asks_healthz_with_python_at_most_every_30_seconds():
    check = next(args for op, args in RUNTIME if op == "HEALTHCHECK")
    assert "python" in check and "http://127.0.0.1:8000/healthz" in check and "curl" not in check
    interval = re.search(r"--interval=(\d+)s", check)
    assert interval and int(interval.group(1)) <= 30


def test_the_oci_labels():
    labels = " ".join(args for op, args in RUNTIME if op == "LABEL")
    for name in ("title", "description", "version", "source", "licenses", "revision"):
        assert f"org.opencontainers.image.{name}=" in labels
    assert 'org.opencontainers.image.revision="${VCS_REF}"' in labels
    assert 'org.opencontainers.image.source="${SOURCE_URL}"' in labels  # no address made up


def test_no_secret_is_baked_in():
    for op, args in STEPS:
        if op in ("ENV", "ARG", "LABEL"):
            assert "SECRET_KEY" not in args, (op, args)
        if op == "COPY":
            assert not re.search(r"\.env|\.secret_key|sqlite3|\.git\b", args), args
    ignored = (ROOT / ".containerignore").read_text().split()
    for kept_out in (
        ".git",
        ".venv*",
        ".env*",
        ".secret_key",
        "db.sqlite3*",
        "workspaces/",
        "staticfiles/",
        "node_modules/",
    ):
        assert kept_out in ignored


def test_the_stack_has_its_services_and_only_nginx_publishes_ports():
    services = COMPOSE["services"]
    assert set(services) == {"migrate", "app1", "app2", "postgres", "redis", "nginx"}
    assert services["migrate"]["restart"] == "no"
    for app in ("app1", "app2"):
        service = services[app]
        assert service["restart"] == "unless-stopped"
        assert service["depends_on"] == {
            "migrate": {"condition": "service_completed_successfully"},
            "postgres": {"condition": "service_healthy"},
            "redis": {"condition": "service_healthy"},
        }
        assert service["env_file"] == "${AGENTSITE_ENV_FILE:-.env}"
        assert "appdata:/data" in service["volumes"] and service["read_only"] is True
        assert {"DATABASE_URL", "REDIS_URL", "ALLOWED_HOSTS", "HTTPS", "TRUSTED_PROXIES"} <= set(service["environment"])
        assert service["environment"]["HTTPS"] == "true"
    assert [name for name, service in services.items() if "ports" in service] == ["nginx"]
    assert services["nginx"]["ports"] == [
        "${AGENTSITE_BIND:-127.0.0.1}:${AGENTSITE_HTTPS_PORT:-8443}:443",
        "${AGENTSITE_BIND:-127.0.0.1}:${AGENTSITE_HTTP_PORT:-8080}:80",
    ]
    assert set(COMPOSE["volumes"]) == {"pgdata", "appdata", "tls"}
    assert "pgdata:/var/lib/postgresql/data" in services["postgres"]["volumes"]


def test_the_healthchecks_are_shell_strings():
    # Exec-form tests with spaces inside an argument are split on them under docker-compose 1.29 + podman.
    for name, service in COMPOSE["services"].items():
        if "healthcheck" in service and not service["healthcheck"].get("disable"):
            assert service["healthcheck"]["test"][0] == "CMD-SHELL", name


def test_compose_holds_no_secret_value():
    values = yaml.safe_dump(COMPOSE)  # what compose reads, its comments left out
    assert "SECRET_KEY" not in values
    passwords = list(re.finditer(r"^\s*\w*PASSWORD\w*:\s*(.+)$", values, re.M))
    assert passwords, "postgres's POSTGRES_PASSWORD is in the file, as a reference"
    for match in passwords:
        assert match.group(1).strip("'\"").startswith("${POSTGRES_PASSWORD:?"), match.group(0)
    assert re.search(r"agentsite:\$\{POSTGRES_PASSWORD:\?[^}]*\}@postgres", COMPOSE_TEXT)
    example = (ROOT / "deploy" / "compose.env.example").read_text()
    assert re.search(r"^SECRET_KEY=replace-", example, re.M) and re.search(
        r"^POSTGRES_PASSWORD=replace-", example, re.M
    )


def test_the_stack_nginx_proxies_as_deploy_does_and_resolves_at_request_time():
    stack = (ROOT / "deploy" / "container" / "nginx" / "default.conf.template").read_text()
    single = (ROOT / "deploy" / "nginx-agentsite.conf.template").read_text()
    for directive in (
        "proxy_buffering off;",
        "proxy_read_timeout 1h;",
        "proxy_send_timeout 1h;",
        "client_max_body_size 16m;",
        "proxy_set_header X-Forwarded-For $remote_addr;",
        "proxy_set_header X-Forwarded-Proto $scheme;",
        "proxy_set_header Upgrade $http_upgrade;",
        "proxy_http_version 1.1;",
    ):
        assert directive in stack and directive in single, directive
    assert re.search(r"^resolver \$\{NGINX_LOCAL_RESOLVERS\} valid=\d+s", stack, re.M)
    # A variable in proxy_pass: the name is looked up per request, not once at start.
    assert "proxy_pass $agentsite_upstream;" in stack


def test_the_make_targets_and_their_variables():
    makefile = (ROOT / "Makefile").read_text()
    for target in ("image", "compose-up", "compose-down"):
        assert re.search(rf"^{target}:", makefile, re.M)
    for variable in (
        "CONTAINER_ENGINE",
        "IMAGE",
        "BASE_IMAGE",
        "OFFLINE",
        "BUILD_FLAGS",
        "COMPOSE",
        "COMPOSE_PROJECT_NAME",
        "AGENTSITE_ENV_FILE",
        "AGENTSITE_BIND",
        "AGENTSITE_HTTPS_PORT",
        "AGENTSITE_HTTP_PORT",
        "AGENTSITE_HOST",
        "POSTGRES_IMAGE",
        "REDIS_IMAGE",
        "NGINX_IMAGE",
    ):
        assert re.search(rf"^{variable} \?=", makefile, re.M), variable


# --- the Helm chart ---------------------------------------------------------------------------


@pytest.mark.parametrize("values", list(chart_check.VALUE_SETS), ids=list(chart_check.VALUE_SETS))
def test_the_chart_renders_valid_for_kubernetes_1_30(values):
    documents = chart_check.render(chart_check.VALUE_SETS[values])
    chart_check.validate(documents)
    assert any(d["kind"] == "Deployment" for d in documents)


def test_the_validator_refuses_what_kubernetes_would():
    deployment = next(d for d in chart_check.render() if d["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGett"] = {"path": "/x"}
    with pytest.raises(kubernetes_validate.ValidationError):
        chart_check.validate([deployment])


def by_kind(documents: list[dict]) -> dict[str, list[dict]]:
    kinds: dict[str, list[dict]] = {}
    for document in documents:
        kinds.setdefault(document["kind"], []).append(document)
    return kinds


def test_the_deployment_is_restricted_probed_and_reads_settings_from_the_configmap_and_secret():
    kinds = by_kind(chart_check.render())
    # The app's, not the in-chart Redis's.
    deployment = next(d for d in kinds["Deployment"] if d["metadata"]["name"] == "agentsite")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 2
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False and security["readOnlyRootFilesystem"] is True
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert container["ports"] == [{"name": "http", "containerPort": 8000, "protocol": "TCP"}]
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == "/healthz"
    assert {v["name"]: v for v in pod["volumes"]}["tmp"] == {"name": "tmp", "emptyDir": {}}
    assert [next(iter(source)) for source in container["envFrom"]] == ["configMapRef", "secretRef"]
    assert "env" not in container, "settings come from the ConfigMap and the Secret only"
    # The Service selects the app's pods only.
    service = next(s for s in kinds["Service"] if s["metadata"]["name"] == "agentsite")
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "server"
    assert service["spec"]["ports"][0]["port"] == 8000
    assert kinds["PodDisruptionBudget"][0]["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]


def test_ingress_timeouts_buffering_and_body_size_for_websocket_and_sse():
    (ingress,) = by_kind(chart_check.render())["Ingress"]
    notes = ingress["metadata"]["annotations"]
    assert int(notes["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600
    assert int(notes["nginx.ingress.kubernetes.io/proxy-send-timeout"]) >= 3600
    assert notes["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"
    assert notes["nginx.ingress.kubernetes.io/proxy-body-size"] == "16m"
    assert ingress["spec"]["ingressClassName"] == "nginx"
    assert ingress["spec"]["rules"][0]["host"] == "chat.example.com"


def test_the_migrate_job_is_a_hook_after_what_it_reads():
    external = chart_check.VALUE_SETS["external services in the chart's secret"]
    for values, hook in (({}, "post-install,pre-upgrade"), (external, "pre-install,pre-upgrade")):
        kinds = by_kind(chart_check.render(values))
        (job,) = kinds["Job"]
        notes = job["metadata"]["annotations"]
        assert notes["helm.sh/hook"] == hook
        assert "before-hook-creation" in notes["helm.sh/hook-delete-policy"]
        assert job["spec"]["template"]["spec"]["containers"][0]["command"] == [
            "python",
            "manage.py",
            "migrate",
            "--noinput",
        ]
        for read in kinds["ConfigMap"] + kinds["Secret"]:
            assert "pre-install" in read["metadata"]["annotations"]["helm.sh/hook"]
            assert int(read["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(notes["helm.sh/hook-weight"])


def test_secrets_and_the_existing_secret():
    kinds = by_kind(chart_check.render())
    (secret,) = kinds["Secret"]
    assert {"SECRET_KEY", "DATABASE_URL", "POSTGRES_PASSWORD"} <= set(secret["data"])
    operator = by_kind(chart_check.render(chart_check.VALUE_SETS["external services and an existing secret"]))
    assert "Secret" not in operator and "StatefulSet" not in operator
    deployment = operator["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]
    assert deployment["envFrom"][1] == {"secretRef": {"name": "agentsite-operator"}}


def test_autoscaling_replaces_the_fixed_replica_count():
    kinds = by_kind(chart_check.render(chart_check.VALUE_SETS["autoscaled, TLS, persistence off"]))
    (hpa,) = kinds["HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2" and hpa["spec"]["minReplicas"] == 3 and hpa["spec"]["maxReplicas"] == 9
    deployment = next(d for d in kinds["Deployment"] if d["metadata"]["name"] == "agentsite")
    assert "replicas" not in deployment["spec"]
    assert kinds["ConfigMap"][0]["data"]["HTTPS"] == "true"
