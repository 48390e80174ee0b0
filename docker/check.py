"""Checks docker/compose.yaml without a Docker engine: it parses, the files it
mounts and builds from exist, the collector configuration wires OTLP in, and
the switchyard binary accepts the environment of every Switchyard service
(`switchyard check-config`). Exits non-zero on any problem.

Usage: python docker/check.py path/to/switchyard"""

import pathlib
import subprocess
import sys

import yaml

HERE = pathlib.Path(__file__).parent
compose = yaml.safe_load((HERE / "compose.yaml").read_text())
failures = []

for name, service in compose["services"].items():
    build = service.get("build")
    if build and not (HERE / build["context"] / build["dockerfile"]).is_file():
        failures.append(f"{name}: no Dockerfile at {build}")
    for volume in service.get("volumes", []):
        source = volume.split(":")[0]
        if source.startswith(".") and not (HERE / source).exists():
            failures.append(f"{name}: mounts {source}, which does not exist")
    for dependency in service.get("depends_on", {}):
        if dependency not in compose["services"]:
            failures.append(f"{name}: depends on unknown service {dependency}")
    if build:
        env = {"PATH": "/usr/bin:/bin", **{k: str(v) for k, v in service.get("environment", {}).items()}}
        args = [sys.argv[1], "check-config"]
        checked = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
        print(f"{name}: switchyard check-config: {(checked.stdout + checked.stderr).strip()}")
        if checked.returncode != 0:
            failures.append(f"{name}: {checked.stderr.strip()}")

collector = yaml.safe_load((HERE / "otel-collector.yaml").read_text())
pipelines = collector["service"]["pipelines"]
for signal in ["traces", "metrics"]:
    if "otlp" not in pipelines.get(signal, {}).get("receivers", []):
        failures.append(f"otel-collector.yaml: no OTLP receiver for {signal}")
endpoint = collector["receivers"]["otlp"]["protocols"]["http"]["endpoint"]
for name, service in compose["services"].items():
    configured = service.get("environment", {}).get("SWITCHYARD_TELEMETRY__OTLP_ENDPOINT")
    if configured and not configured.endswith(endpoint.rsplit(":", 1)[1]):
        failures.append(f"{name}: exports to {configured}, the collector listens on {endpoint}")

for failure in failures:
    print("FAIL", failure)
sys.exit(1 if failures else 0)
