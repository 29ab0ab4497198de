"""Generate the Prometheus Operator's `PrometheusRule` (k8s/prometheus-rule.yaml) from the one
rules file, alerts/quorum-health.rules.yml, so the cluster runs exactly the promtool-tested rules.

    python deploy/cluster/prometheus_rule.py            # rewrite k8s/prometheus-rule.yaml
    python deploy/cluster/prometheus_rule.py --stdout   # print it
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "alerts" / "quorum-health.rules.yml"
OUTPUT = Path(__file__).resolve().parent / "k8s" / "prometheus-rule.yaml"


def prometheus_rule(rules_path: Path = RULES, name: str = "quorum-health", namespace: str = "quorum-health",
                    labels: dict[str, str] | None = None) -> dict:
    groups = yaml.safe_load(Path(rules_path).read_text())["groups"]
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": name,
            "namespace": namespace,
            # the Prometheus resource's ruleSelector picks rules by label; kube-prometheus-stack's
            # default selects release=<its Helm release name>
            "labels": labels if labels is not None else {"app.kubernetes.io/part-of": "quorum-health",
                                                          "release": "kube-prometheus-stack"},
        },
        "spec": {"groups": groups},
    }


class _BlockStrings(yaml.SafeDumper):
    """Multi-line strings (PromQL) as literal blocks, as they are in the rules file."""


_BlockStrings.add_representer(str, lambda dumper, value: dumper.represent_scalar(
    "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None))


def render(rules_path: Path = RULES) -> str:
    header = f"# Generated from {rules_path.relative_to(REPO)} by deploy/cluster/prometheus_rule.py: do not edit.\n"
    return header + yaml.dump(prometheus_rule(rules_path), Dumper=_BlockStrings, sort_keys=False, width=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stdout", action="store_true", help="print instead of writing " + str(OUTPUT.relative_to(REPO)))
    args = parser.parse_args(argv)
    text = render()
    if args.stdout:
        sys.stdout.write(text)
    else:
        OUTPUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
