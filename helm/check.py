"""Lints and renders the chart with the Helm SDK (helm-python-sdk, no helm
binary), for the default values and for ci-values-all.yaml, validates every
rendered manifest against the Kubernetes schemas (kubernetes-validate), and
has the switchyard binary check the configuration file the chart writes.
Exits non-zero on any problem.

Usage: python helm/check.py [path/to/switchyard]"""

import pathlib
import subprocess
import sys
import tempfile

import helm_python as helm
import kubernetes_validate
import yaml

KUBERNETES = "1.33"
HERE = pathlib.Path(__file__).parent
CHART = HERE / "switchyard"

failures = []
for name, values in [("defaults", None), ("everything", yaml.safe_load((HERE / "ci-values-all.yaml").read_text()))]:
    report = helm.lint(str(CHART), values, strict=True, kube_version=f"v{KUBERNETES}.0")
    for message in report.get("messages", []):
        print(f"lint {name}: {message}")
        if message.get("severity", 0) >= 2:
            failures.append(f"lint {name}: {message}")
    failures += [f"lint {name}: {error}" for error in report.get("errors", [])]

chart = helm.Chart.load(str(CHART))
for name, values in [("defaults", None), ("everything", yaml.safe_load((HERE / "ci-values-all.yaml").read_text()))]:
    chart.validate_schema(values)
    rendered = chart.render(values, name="switchyard", namespace="mcp", is_install=True)
    documents = []
    for path, text in sorted(rendered.items()):
        if path.endswith("NOTES.txt"):
            continue
        documents += [(path, d) for d in yaml.safe_load_all(text) if d]
    kinds = sorted({d["kind"] for _, d in documents})
    print(f"{name}: {len(documents)} manifests: {', '.join(kinds)}")
    for path, document in documents:
        try:
            kubernetes_validate.validate(document, KUBERNETES, strict=True)
        except Exception as error:  # noqa: BLE001 - every failure is reported
            failures.append(f"{name}: {path}: {document.get('kind')}: {error}")
        if document["kind"] == "ConfigMap" and len(sys.argv) > 1:
            with tempfile.NamedTemporaryFile("w", suffix=".toml") as config:
                config.write(document["data"]["switchyard.toml"])
                config.flush()
                env = {"PATH": "/usr/bin:/bin"}  # no SWITCHYARD_* of the caller's
                checked = subprocess.run([sys.argv[1], "check-config", "--config", config.name],
                                         capture_output=True, text=True, env=env, check=False)
                print(f"{name}: switchyard check-config: {(checked.stdout + checked.stderr).strip()}")
                if checked.returncode != 0:
                    failures.append(f"{name}: the chart's switchyard.toml: {checked.stderr.strip()}")

for failure in failures:
    print("FAIL", failure)
sys.exit(1 if failures else 0)
