"""The Helm chart rendered offline and every manifest validated for Kubernetes 1.30.

`python deploy/helm/chart_check.py` (deploy/container/ci-check runs it; tests/test_deploy_files.py
imports it). Rendering is Helm's own template engine through helm-python-sdk (Helm v4's Go SDK
behind a C ABI, shipped in its wheel: no helm binary to download, which these machines cannot);
validation is kubernetes-validate against the Kubernetes 1.30 OpenAPI schemas it carries, in
strict mode (a misspelled field is an error, as `kubectl apply` would find it).
"""

from __future__ import annotations

import sys
from pathlib import Path

import helm_python
import kubernetes_validate
import yaml

CHART = Path(__file__).resolve().parent / "agentsite"
KUBERNETES = "1.30.0"

# The defaults, and each of the values the chart documents (values.yaml), away from its default.
VALUE_SETS: dict[str, dict] = {
    "defaults": {},
    "external services and an existing secret": {
        "postgresql": {"enabled": False},
        "redis": {"enabled": False},
        "existingSecret": "agentsite-operator",
        "externalDatabase": {"url": "postgres://agentsite:pw@db.example.com:5432/agentsite"},
        "externalRedis": {"url": "redis://cache.example.com:6379/0"},
    },
    "external services in the chart's secret": {
        "postgresql": {"enabled": False},
        "redis": {"enabled": False},
        "secretKey": "an-operator-chosen-key-of-fifty-characters-or-more-xx",
        "externalDatabase": {"url": "postgres://agentsite:pw@db.example.com:5432/agentsite"},
        "externalRedis": {"url": "redis://cache.example.com:6379/0"},
        "env": {"AGENT_MODEL": "gpt-4o-mini", "ALLOWED_HOSTS": "chat.example.com,chat2.example.com"},
        "secretEnv": {"OPENAI_API_KEY": "sk-test"},
    },
    "autoscaled, TLS, persistence off": {
        "autoscaling": {"enabled": True, "minReplicas": 3, "maxReplicas": 9, "targetCPUUtilizationPercentage": 60},
        "ingress": {
            "className": "nginx",
            "host": "agents.example.org",
            "tls": {"secretName": "agents-tls"},
            "annotations": {"cert-manager.io/cluster-issuer": "letsencrypt"},
        },
        "persistence": {"enabled": False},
        "podDisruptionBudget": {"minAvailable": 2},
        "image": {"repository": "registry.example.com/agentsite", "tag": "1.2.3", "pullPolicy": "Always"},
    },
    "existing claim, no ingress": {
        "ingress": {"enabled": False},
        "persistence": {
            "existingClaim": "shared-data",
            "storageClass": "nfs",
            "accessMode": "ReadWriteMany",
            "size": "20Gi",
        },
        "replicaCount": 4,
    },
}


def render(
    values: dict | None = None, *, release: str = "agentsite", namespace: str = "agentsite", chart_dir: Path = CHART
) -> list[dict]:
    """The manifests `helm install` would apply (hooks included), as dicts."""
    chart = helm_python.Chart.load(chart_dir)
    rendered = chart.render(values or {}, name=release, namespace=namespace, is_install=True)
    documents = []
    for path, text in sorted(rendered.items()):
        if not path.endswith((".yaml", ".yml")):
            continue
        documents.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return documents


def validate(documents: list[dict]) -> None:
    """Raise kubernetes_validate.ValidationError for the first manifest the 1.30 schemas refuse."""
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES, strict=True)


def main() -> int:
    lint = helm_python.lint(str(CHART), strict=True, kube_version=f"v{KUBERNETES}")
    problems = [m for m in lint.get("messages") or [] if m.get("severity", 0) >= 2] + list(lint.get("errors") or [])
    if problems:
        print(f"chart-check: helm lint: {problems}", file=sys.stderr)
        return 1
    for name, values in VALUE_SETS.items():
        documents = render(values)
        try:
            validate(documents)
        except kubernetes_validate.ValidationError as exc:
            print(f"chart-check: {name}: {exc}", file=sys.stderr)
            return 1
        kinds = ", ".join(sorted({d["kind"] for d in documents}))
        print(f"chart-check: {name}: {len(documents)} manifests valid for Kubernetes {KUBERNETES} ({kinds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
