#!/usr/bin/env bash
# Instructions per `tools/call` (echo, JSON answer) in the server, counted by
# callgrind: a figure that does not move with whatever else the machine is
# doing, for before/after comparisons of the hot path that a noisy two-core
# machine cannot settle with timings. Compare two binaries built the same way:
#
#   loadtest/callgrind-tools-call.sh target/release/switchyard [requests]
#
# Given the `loadtest` binary instead, it counts `loadtest bare`'s
# hand-written handler (`hand.rs`), the baseline #18's `loadtest` row is
# weighed against, on the same call.
#
# Starts the server under callgrind with instrumentation off, sends 300
# requests to warm it, turns instrumentation on, sends `requests` (default
# 2,000) one at a time on one keep-alive connection, dumps, and prints the
# instructions per request. Needs valgrind and python3. With CALLGRIND_OUT=FILE
# set, the dump is kept there for `callgrind_annotate FILE`.
#
# With UPSTREAM=h2c (or UPSTREAM=http1), the call is an upstream tool's
# instead: a second server of the same binary, not under callgrind, is
# registered in the counted one as namespace `up` (cleartext HTTP/2 or
# HTTP/1.1), and `up_echo` is called; the count is the front server's alone.
# With WASM=MODULE (the units example), the call is that module's
# `units_convert`, registered as namespace `units`.
# With CLIENT_INFO=1, the request's `_meta` also carries the client's
# `clientInfo` (a name and a version), as clients should send it with every
# request; `loadtest`'s bodies leave it out.
set -euo pipefail
binary=$(realpath "$1")
requests=${2:-2000}
if [[ $(basename "$binary") == loadtest ]]; then
  serve=(bare)
  if [[ -n ${UPSTREAM:-}${WASM:-} ]]; then
    echo "UPSTREAM and WASM count Switchyard's call, not the hand-written handler's" >&2; exit 2
  fi
else
  serve=(serve)
fi
if [[ -n ${WASM:-} && ! -f $WASM ]]; then
  echo "WASM=$WASM is not a file (build the units example first)" >&2; exit 2
fi
case ${UPSTREAM:-} in
  "" | h2c | http1) ;;
  *) echo "UPSTREAM is h2c or http1" >&2; exit 2 ;;
esac
work=$(mktemp -d)
server= upstream=
trap 'kill "$server" $upstream 2>/dev/null || true; rm -rf "$work"' EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
upstream_port=
if [[ -n ${UPSTREAM:-} ]]; then
  upstream_port=$(free_port)
  SWITCHYARD_DATABASE_URL="sqlite://$work/upstream.db" SWITCHYARD_LOG=warn \
    "$binary" serve --bind "127.0.0.1:$upstream_port" >"$work/upstream.log" 2>&1 &
  upstream=$!
fi
serve+=(--bind "127.0.0.1:$port")
SWITCHYARD_DATABASE_URL="sqlite://$work/registry.db" SWITCHYARD_UPSTREAM__ALLOWED_RANGES=127.0.0.0/8 \
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$work/callgrind.out" \
  "$binary" "${serve[@]}" >"$work/server.log" 2>&1 &
server=$!

python3 - "$port" "$requests" "$server" "$work" "$(dirname "$(realpath "$0")")" "${UPSTREAM:-}" "$upstream_port" "${WASM:+$(realpath "${WASM:-}")}" "${CLIENT_INFO:-}" <<'EOF'
import json, subprocess, sys, time, glob
port, requests, pid, work = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
sys.path.insert(0, sys.argv[5])
from ready import connect_when_ready
upstream, tool = sys.argv[6], "echo"
c = connect_when_ready(port)
if upstream:
    connect_when_ready(int(sys.argv[7])).close()
    spec = {"url": f"http://127.0.0.1:{sys.argv[7]}/mcp", "h2c": upstream == "h2c"}
    c.request("POST", "/admin/v1/plugins", json.dumps({"namespace": "up", "kind": "upstream", "spec": spec}),
              {"content-type": "application/json"})
    r = c.getresponse(); r.read()
    assert r.status < 300, r.status
    tool = "up_echo"
arguments, expected = {"text": "hello"}, b"hello"
if sys.argv[8]:
    c.request("POST", "/admin/v1/artifacts", open(sys.argv[8], "rb").read(), {"content-type": "application/wasm"})
    r = c.getresponse(); artifact = json.loads(r.read())
    assert r.status < 300, r.status
    spec = {"artifact": artifact["sha256"]}
    c.request("POST", "/admin/v1/plugins", json.dumps({"namespace": "units", "kind": "wasm", "spec": spec}),
              {"content-type": "application/json"})
    r = c.getresponse(); r.read()
    assert r.status < 300, r.status
    tool, arguments, expected = "units_convert", {"value": 1, "from": "mi", "to": "km"}, b"1.609344"
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
if sys.argv[9]:
    meta["io.modelcontextprotocol/clientInfo"] = {"name": "loadtest", "version": "1.0"}
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
    "name": tool, "arguments": arguments, "_meta": meta}})
headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
           "mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": tool}
def call(n):
    for _ in range(n):
        c.request("POST", "/mcp", body, headers); r = c.getresponse(); answer = r.read()
        assert r.status == 200 and expected in answer, answer
call(300)
subprocess.run(["callgrind_control", "-i", "on", pid], check=True, capture_output=True)
call(requests)
subprocess.run(["callgrind_control", "-i", "off", pid], check=True, capture_output=True)
subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
# The dump is written after the command is acknowledged: wait for its totals.
total = 0
for _ in range(300):
    for dump in glob.glob(f"{work}/callgrind.out.*"):
        for line in open(dump):
            if line.startswith("totals:"):
                total = max(total, int(line.split()[1]))
    if total:
        break
    time.sleep(0.1)
print(f"{total / requests:.0f} instructions per tools/call ({requests} requests, {total} in all)")
EOF
if [[ -n ${CALLGRIND_OUT:-} ]]; then
  cp "$(ls -t "$work"/callgrind.out.* | head -1)" "$CALLGRIND_OUT"
fi
