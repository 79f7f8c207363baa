"""Lints and renders the Helm chart, and validates every rendered object against the Kubernetes schemas.

Run by scripts/chartCheck.ts with the project's chart venv (.tools/chart-venv):
  chart_check.py CHART KUBE_VERSION NAME=VALUES.yaml [NAME=VALUES.yaml ...]

Helm is Helm's own Go SDK (v4), prebuilt in the `helm-python-sdk` wheel: `lint` is `helm lint
--strict`, `render` is `helm template` (offline, as an install). The schemas are the strict JSON
schemas (unknown fields are errors) that `kubernetes-validate` ships, generated from the Kubernetes
OpenAPI. Prints one JSON document: per value set, the lint messages, the rendered objects and
their schema errors, or the render error.
"""

import json
import sys

import helm_python as helm
import kubernetes_validate
import yaml

SEVERITY = {0: "UNKNOWN", 1: "INFO", 2: "WARNING", 3: "ERROR"}


def check(chart: str, kube_version: str, name: str, values_file: str) -> dict:
    with open(values_file, encoding="utf-8") as handle:
        values = yaml.safe_load(handle) or {}
    report = helm.lint(chart, values, strict=True, kube_version=f"v{kube_version}")
    lint = [f"[{SEVERITY.get(m['severity'], m['severity'])}] {m['path']}: {m['error']}" for m in report["messages"]]
    lint += [f"[ERROR] {error}" for error in report.get("errors", [])]
    result: dict = {"name": name, "lint": lint, "objects": [], "renderError": None}
    try:
        with helm.Chart.load(chart) as loaded:
            manifests = loaded.render(values, name="cp", namespace="card-poller", is_install=True)
    except Exception as error:  # the chart's own `required`/`fail` messages arrive here
        result["renderError"] = f"{type(error).__name__}: {error}"
        return result
    for source in sorted(manifests):
        for document in yaml.safe_load_all(manifests[source]):
            if not document:
                continue
            errors = []
            try:
                kubernetes_validate.validate(document, kube_version, strict=True)
            except kubernetes_validate.ValidationError as error:
                errors.append(f"{'.'.join(str(p) for p in error.path)}: {error.message}")
            except kubernetes_validate.SchemaNotFoundError as error:
                errors.append(f"no schema: {error}")
            result["objects"].append({"source": source, "object": document, "schemaErrors": errors})
    return result


def main() -> None:
    chart, kube_version, *sets = sys.argv[1:]
    print(json.dumps([check(chart, kube_version, *entry.split("=", 1)) for entry in sets]))


if __name__ == "__main__":
    main()
