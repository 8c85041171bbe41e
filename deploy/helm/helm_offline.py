"""`helm` where there is no cluster (deploy/container/ci-check puts it first on the PATH to run
docs/deployment.md's Kubernetes block as written): `helm upgrade --install NAME CHART
[--namespace NS] [--create-namespace] [--set KEY=VALUE]... [-f VALUES.yaml]...` renders the chart
offline with those values, as Helm's install would, and validates every manifest for Kubernetes
1.30 (chart_check.py). Nothing is installed; anything else is refused."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import helm_python
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chart_check import KUBERNETES, render, validate  # noqa: E402 - beside this file, not a package


def deep_merge(base: dict, extra: dict) -> dict:
    merged = dict(base)
    for key, value in extra.items():
        merged[key] = (
            deep_merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
        )
    return merged


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="helm (offline)")
    parser.add_argument("command", choices=["upgrade"])
    parser.add_argument("release")
    parser.add_argument("chart")
    parser.add_argument("--install", action="store_true", required=True)
    parser.add_argument("--namespace", "-n", default="default")
    parser.add_argument("--create-namespace", action="store_true")
    parser.add_argument("--set", action="append", default=[])
    parser.add_argument("--values", "-f", action="append", default=[])
    args = parser.parse_args(argv)
    chart_file = Path(args.chart) / "Chart.yaml"
    if not chart_file.is_file() or yaml.safe_load(chart_file.read_text()).get("name") != "agentsite":
        print(f"helm (offline): only the agentsite chart (deploy/helm/agentsite), not {args.chart}", file=sys.stderr)
        return 2
    values: dict = {}
    for path in args.values:
        values = deep_merge(values, yaml.safe_load(Path(path).read_text()) or {})
    for assignment in args.set:
        values = deep_merge(values, helm_python.parse_set_string(assignment))
    documents = render(values, release=args.release, namespace=args.namespace, chart_dir=Path(args.chart))
    validate(documents)
    for document in documents:
        print(f"would apply {document['kind']}/{document['metadata']['name']} in {args.namespace}")
    print(
        f"helm (offline): {len(documents)} manifests of {args.release} valid for Kubernetes {KUBERNETES}; nothing installed"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
