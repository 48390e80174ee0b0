"""Lints and renders the chart with the Helm SDK (helm-python-sdk, no helm
binary), for the default values and for ci-values-all.yaml, validates every
rendered manifest against the Kubernetes schemas (kubernetes-validate), and
has the switchyard binary check the configuration file the chart writes
(and checks what it grants upstream specs, where config.extraToml, config.upstream,
config.http.trustedProxies, config.redisLogMaxLen and the Redis CA land),
checks that every Ingress host routes the MCP endpoint and the OAuth metadata;
the ServiceMonitor (a CRD) is checked for what the Prometheus Operator needs,
and the dashboard ConfigMap against dashboards/switchyard.json (whose PromQL
the Rust test `telemetry::the_dashboard_queries_name_real_metrics` checks).
Exits non-zero on any problem.

Usage: python helm/check.py [path/to/switchyard]"""

import json
import pathlib
import subprocess
import sys
import tempfile
import tomllib

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
        if document["apiVersion"].startswith("monitoring.coreos.com/"):
            # A CRD: kubernetes-validate has no schema for it; check what the
            # Prometheus Operator needs to find the pods.
            spec = document.get("spec", {})
            endpoints = spec.get("endpoints", [])
            if not spec.get("selector", {}).get("matchLabels") or not endpoints:
                failures.append(f"{name}: {path}: a ServiceMonitor without selector or endpoints")
            if any(e.get("port") != "metrics" or e.get("path") != "/metrics" for e in endpoints):
                failures.append(f"{name}: {path}: a ServiceMonitor endpoint not on the metrics port's /metrics")
            continue
        try:
            kubernetes_validate.validate(document, KUBERNETES, strict=True)
        except Exception as error:  # noqa: BLE001 - every failure is reported
            failures.append(f"{name}: {path}: {document.get('kind')}: {error}")
        if document["kind"] == "ConfigMap" and "switchyard.json" in document["data"]:
            dashboard = json.loads(document["data"]["switchyard.json"])
            if dashboard != json.loads((CHART / "dashboards" / "switchyard.json").read_text()):
                failures.append(f"{name}: {path}: the dashboard ConfigMap differs from dashboards/switchyard.json")
        if document["kind"] == "Ingress":
            # OAuth discovery works through the Ingress: after a 401 a client
            # fetches the metadata at both well-known paths, on the same host.
            wanted = {"/mcp", "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"}
            for rule in document["spec"]["rules"]:
                routed = {p["path"] for p in rule["http"]["paths"] if p["pathType"] == "Exact"}
                if routed != wanted:
                    failures.append(f"{name}: {path}: host {rule.get('host')} routes {sorted(routed)}, not {sorted(wanted)}")
        if document["kind"] == "ConfigMap" and "switchyard.toml" in document["data"]:
            written = tomllib.loads(document["data"]["switchyard.toml"])
            # Upstream specs are granted exactly the variables the chart exposes.
            exposed = [e["env"] for e in (values or {}).get("secrets", {}).get("upstreamEnv", [])]
            if written.get("upstream", {}).get("secret_env") != exposed:
                failures.append(f"{name}: upstream.secret_env is not {exposed}: {written.get('upstream')}")
            # WASM's memory fits in half the pod's memory limit (1Gi by default).
            limit = ((values or {}).get("resources") or {}).get("limits", {}).get("memory", "1Gi")
            mib = int(limit[:-2]) * (1024 if limit.endswith("Gi") else 1)
            if written.get("wasm", {}).get("memory_budget_mib") != mib // 2:
                failures.append(f"{name}: wasm.memory_budget_mib is not half of {limit}: {written.get('wasm')}")
            # config.upstream's keys land in [upstream], trustedProxies in [http].
            for key, value in ((values or {}).get("config", {}).get("upstream") or {}).items():
                if written.get("upstream", {}).get(key) != value:
                    failures.append(f"{name}: config.upstream.{key} is not upstream.{key}: {written.get('upstream')}")
            proxies = ((values or {}).get("config", {}).get("http") or {}).get("trustedProxies") or None
            if written.get("http", {}).get("trusted_proxies") != proxies:
                failures.append(f"{name}: http.trusted_proxies is not {proxies}: {written.get('http')}")
            # Pod logs are JSON lines unless config.logFormat says otherwise.
            log_format = ((values or {}).get("config") or {}).get("logFormat", "json")
            if written.get("log_format") != log_format:
                failures.append(f"{name}: log_format is {written.get('log_format')}, not {log_format}")
            # config.redisLogMaxLen is the bus log's length.
            log_max_len = ((values or {}).get("config") or {}).get("redisLogMaxLen")
            if written.get("redis_log_max_len") != log_max_len:
                failures.append(f"{name}: redis_log_max_len is {written.get('redis_log_max_len')}, not {log_max_len}")
            # The Redis CA is read where the Deployment mounts secrets.redisTlsCa.
            ca = ((values or {}).get("secrets") or {}).get("redisTlsCa") or {}
            expected_ca = f"/etc/switchyard/redis-ca/{ca['key']}" if ca else None
            if written.get("redis_tls_ca_file") != expected_ca:
                failures.append(f"{name}: redis_tls_ca_file is {written.get('redis_tls_ca_file')}, not {expected_ca}")
            # extraToml's bare keys stay top-level (they once landed in the last [[auth.issuers]]).
            if name == "everything" and written.get("redis_prefix") != "switchyard-prod:":
                failures.append(f"{name}: extraToml's bare redis_prefix is not a top-level key")
        if document["kind"] == "Deployment":
            ca = ((values or {}).get("secrets") or {}).get("redisTlsCa") or {}
            pod = document["spec"]["template"]["spec"]
            secrets = {v.get("secret", {}).get("secretName") for v in pod.get("volumes", [])}
            mounts = {m["mountPath"] for c in pod["containers"] for m in c.get("volumeMounts", [])}
            if ca and (ca["name"] not in secrets or "/etc/switchyard/redis-ca" not in mounts):
                failures.append(f"{name}: secrets.redisTlsCa is not mounted at /etc/switchyard/redis-ca")
        if document["kind"] == "ConfigMap" and "switchyard.toml" in document["data"] and len(sys.argv) > 1:
            with tempfile.NamedTemporaryFile("w", suffix=".toml") as config, \
                    tempfile.NamedTemporaryFile("w", suffix=".pem") as ca_file:
                text = document["data"]["switchyard.toml"]
                env = {"PATH": "/usr/bin:/bin"}  # no SWITCHYARD_* of the caller's
                if "redis_tls_ca_file" in tomllib.loads(text):
                    # The pod's Secret-mounted CA, and the rediss:// URL and keys its env gives.
                    text = text.replace(tomllib.loads(text)["redis_tls_ca_file"], ca_file.name)
                    env["SWITCHYARD_REDIS_URL"] = "rediss://redis.example.com:6380"
                    env["SWITCHYARD_STATE__KEYS"] = "ci:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="
                config.write(text)
                config.flush()
                checked = subprocess.run([sys.argv[1], "check-config", "--config", config.name],
                                         capture_output=True, text=True, env=env, check=False)
                print(f"{name}: switchyard check-config: {(checked.stdout + checked.stderr).strip()}")
                if checked.returncode != 0:
                    failures.append(f"{name}: the chart's switchyard.toml: {checked.stderr.strip()}")

for failure in failures:
    print("FAIL", failure)
sys.exit(1 if failures else 0)
