#!/usr/bin/env bash
# Writes the release binary's link order: the functions a server runs when it
# starts, idles and serves, one mangled name a line (#18's idle-memory row).
#
#   loadtest/symbol-order.sh target/release/switchyard crates/switchyard/symbol-order.txt
#
# Why: the kernel keeps resident the pages of code a process has run, and maps
# 64 KiB around each page it faults in. Left in the order the compiler wrote
# them, the few thousand functions a server runs are spread over the whole
# 28 MB text segment, and an idle server held 13.8 MiB of code for about 3.7
# MiB of functions run. The switchyard crate's build script hands this list to
# the linker (lld's `--symbol-ordering-file`), which places these functions
# first and together. A name the build no longer has is skipped by the linker,
# so a stale list costs memory, never correctness; rerun this after changing
# dependencies or the toolchain, and `loadtest memory` shows whether it paid.
# Build the binary as the image does (`cargo build --release -p switchyard`):
# the names carry a hash of the compiler and of each crate's features.
#
#   loadtest/symbol-order.sh --check target/release/switchyard [MIN]
#
# prints how many of the listed names the binary has (a list that matches its
# build has them all), and how many of those the linker laid together: within
# the span, from the first of them, that their sizes fill (with 5% for the
# padding between functions). It fails when either share is under MIN (a
# percentage): the image's build runs it with 100, so an image is never built
# from a list that changes in the code have left stale (which once raised an
# idle server from 11 to 15 MiB and slowed it under load; at 99.2% it idled 1
# MiB higher), nor from a build the list did not order (a linker that ignored
# it, or `SWITCHYARD_LINK_LAYOUT=off`). The list's first line, a comment to
# the linker, names the compiler the binary was built with; the build warns
# when its own differs.
#
# Runs the binary under callgrind (valgrind, python3) with names left mangled:
# start, requests of every list, read, get and call method, completion, ping
# and discovery, with both answers (JSON, SSE), over HTTP/1.1, a listen
# stream opened and closed, a request from a 2025-11-25 client, errors, calls
# and listen streams over cleartext HTTP/2 (`h2c.py`: the HTTP/2 path's code
# was left scattered without them, and the first HTTP/2 listen streams a
# replica served faulted in 4 MiB of it), then a few seconds idle. Every
# function with a cost in the binary's own object is listed, the most run
# first, so that the request path is densest.
# That is a server as a newcomer starts it (SQLite, no Redis). With
# PG_ADMIN_URL (a PostgreSQL database to create a scratch database from) and
# REDIS_URL set, a second pass runs the same against PostgreSQL and Redis, as
# a cluster's replicas do, and the functions only it ran follow the first
# pass's, so that the default server's stay densest. With WASM_MODULE set (the
# units example: `cargo build --profile wasm-guest --target wasm32-wasip1 -p
# switchyard-example-units`), a last pass registers it and an upstream server
# (over HTTP/1.1, and again as `h2c`) through the admin API and calls them
# (wasmtime's compiler and runtime, the upstream client), and its functions
# come last.
#
#   PG_ADMIN_URL=postgres://postgres@127.0.0.1:5432/postgres REDIS_URL=redis://127.0.0.1:6379 \
#     WASM_MODULE=target/wasm32-wasip1/wasm-guest/switchyard_example_units.wasm \
#     loadtest/symbol-order.sh target/release/switchyard crates/switchyard/symbol-order.txt
set -euo pipefail
here=$(dirname "$(realpath "$0")")
if [[ $1 == --check ]]; then
  # Shell, awk and nm alone: the image's build stage runs it, and needs no
  # python3 for it (nor gawk: Debian's awk is mawk, without `strtonum`).
  binary=$(realpath "$2")
  awk -v least="${3:-0}" -v binary="$binary" '
    function hex(digits,   value, i) {
      value = 0
      for (i = 1; i <= length(digits); i++) value = value * 16 + index("0123456789abcdef", substr(digits, i, 1)) - 1
      return value
    }
    # `nm -S`: address, size, type, name (a symbol without a size has no size field).
    NR == FNR {
      present[$NF] = 1
      if (NF == 4 && $3 ~ /^[tTwW]$/ && !($4 in start)) { start[$4] = hex($1); size[$4] = hex($2) }
      next
    }
    /^#/ || $0 == "" { next }
    {
      listed++
      if (!($0 in present)) next
      found++
      if ($0 in start) {
        laid[++functions] = $0; span += size[$0]
        if (first == "" || start[$0] < first) first = start[$0]
      }
    }
    END {
      if (length(present) == 0 || listed == 0) {
        print "no symbols read from " binary " (is it stripped, or is nm missing?), or an empty list" > "/dev/stderr"
        exit 1
      }
      # Ordered, they lie from the first of them on, as close as their sizes
      # and the padding between them allow.
      for (i = 1; i <= functions; i++) if (start[laid[i]] < first + span * 1.05) together++
      share = 100 * found / listed
      placed = functions ? 100 * together / functions : 0
      printf "%d of the %d listed functions are in %s (%.1f%%); %d of the %d with a size laid together (%.1f%%)\n", found, listed, binary, share, together, functions, placed
      if (share < least) {
        printf "under %s%% found: crates/switchyard/symbol-order.txt is stale for this build; write it again (loadtest/symbol-order.sh, its header says how)\n", least > "/dev/stderr"
        exit 1
      }
      if (placed < least) {
        printf "under %s%% laid together: this build was not laid out by this list (built from another list, with SWITCHYARD_LINK_LAYOUT=off, or by another linker than LLD?)\n", least > "/dev/stderr"
        exit 1
      }
    }' <(nm -S --defined-only "$binary") "$here/../crates/switchyard/symbol-order.txt"
  exit
fi
binary=$(realpath "$1")
out=$2
work=$(mktemp -d)
server=
upstream=
scratch_db=switchyard_symbol_order_$$
# The services pass's keys in Redis, removed with the scratch database.
redis_prefix=switchyard-symbol-order-$$:
cleanup() {
  [[ -n $server ]] && { kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; } || true
  [[ -n $upstream ]] && { kill "$upstream" 2>/dev/null; wait "$upstream" 2>/dev/null; } || true
  [[ -n ${PG_ADMIN_URL:-} ]] && psql -q "$PG_ADMIN_URL" -c "DROP DATABASE IF EXISTS $scratch_db WITH (FORCE)" >/dev/null 2>&1 || true
  if [[ -n ${REDIS_URL:-} ]]; then
    redis-cli -u "$REDIS_URL" --scan --pattern "$redis_prefix*" 2>/dev/null |
      xargs -r -d '\n' -n 100 redis-cli -u "$REDIS_URL" del >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

cat >"$work/workload.py" <<'EOF'
import http.client, json, os, sys, time
sys.path.insert(0, os.environ["LOADTEST_DIR"])
from ready import connect_when_ready
from h2c import H2c
port = int(sys.argv[1])
V = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}}
c = connect_when_ready(port, tries=1200, timeout=120)

def message(method, params=None, name=None, sse=False, version=V, raw=None):
    """A request's body and headers, over either protocol."""
    params = dict(params or {})
    if version == V:
        params["_meta"] = META
    body = raw if raw is not None else json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    headers = {"content-type": "application/json",
               "accept": "text/event-stream, application/json" if sse else "application/json, text/event-stream",
               "mcp-protocol-version": version, "mcp-method": method}
    if name is not None:
        headers["mcp-name"] = name
    return body, headers
def post(method, params=None, name=None, sse=False, version=V, raw=None):
    c.request("POST", "/mcp", *message(method, params, name, sse, version, raw))
    r = c.getresponse(); answer = r.read()
    return r.status, answer
LISTEN = ("subscriptions/listen", {"notifications": {"toolsListChanged": True}})

def result(method, params=None):
    status, answer = post(method, params)
    return json.loads(answer).get("result", {})

# The plugins pass: a WASM module and an upstream server, registered through
# the admin API, then called like the built-in tools.
if len(sys.argv) > 2:
    wasm, upstream = sys.argv[2], sys.argv[3]
    c.request("POST", "/admin/v1/artifacts", open(wasm, "rb").read(), {"content-type": "application/wasm"})
    r = c.getresponse(); uploaded = json.loads(r.read())
    assert r.status < 300, uploaded
    for plugin in ({"namespace": "units", "kind": "wasm", "spec": {"artifact": uploaded["sha256"]}},
                   {"namespace": "up", "kind": "upstream", "spec": {"url": upstream}},
                   {"namespace": "uph2", "kind": "upstream", "spec": {"url": upstream, "h2c": True}}):
        c.request("POST", "/admin/v1/plugins", json.dumps(plugin), {"content-type": "application/json"})
        r = c.getresponse(); answer = r.read()
        assert r.status < 300, answer
    for _ in range(600):
        names = {tool["name"] for tool in result("tools/list").get("tools", [])}
        if {"units_convert", "up_echo", "uph2_echo"} <= names: break
        time.sleep(0.1)
    else:
        sys.exit("the plugins' tools did not appear")
# Arguments that get the plugins' tools past validation into their code.
ARGUMENTS = {"up_echo": {"text": "hello"}, "uph2_echo": {"text": "hello"},
             "units_convert": {"value": 1, "from": "mi", "to": "km"}}

for _ in range(3):
    for path in ("/healthz", "/readyz", "/metrics"):
        c.request("GET", path); c.getresponse().read()
    post("server/discover"); post("ping")
    tools = result("tools/list").get("tools", [])
    resources = result("resources/list").get("resources", [])
    result("resources/templates/list")
    prompts = result("prompts/list").get("prompts", [])
    for sse in (False, True):
        for _ in range(100):
            post("tools/call", {"name": "echo", "arguments": {"text": "hello"}}, name="echo", sse=sse)
    for tool in tools:
        post("tools/call", {"name": tool["name"], "arguments": {}}, name=tool["name"])
        if tool["name"] in ARGUMENTS:
            for _ in range(20):
                post("tools/call", {"name": tool["name"], "arguments": ARGUMENTS[tool["name"]]}, name=tool["name"])
    for resource in resources:
        post("resources/read", {"uri": resource["uri"]}, name=resource["uri"])
    for prompt in prompts:
        post("prompts/get", {"name": prompt["name"], "arguments": {}}, name=prompt["name"])
    post("completion/complete", {"ref": {"type": "ref/prompt", "name": "x"}, "argument": {"name": "a", "value": ""}})
    # Errors: a bad header, an unknown method, a body that is not JSON.
    post("tools/call", {"name": "echo", "arguments": {"text": "x"}}, name="other")
    post("no/such")
    post("ping", raw="{not json")
    # A client of the previous revision: initialize, then a call.
    post("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                        "clientInfo": {"name": "order", "version": "1"}}, version="2025-11-25")
    post("tools/list", version="2025-11-25")
    # A listen stream: acknowledged, then closed by the client.
    s = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    s.request("POST", "/mcp", *message(*LISTEN))
    r = s.getresponse(); r.fp.readline(); s.close()
    # Over cleartext HTTP/2, as a load balancer speaking it carries them:
    # calls (JSON and SSE answers) and listen streams multiplexed on one
    # connection, the streams acknowledged, then reset by the client.
    with H2c(port) as h2:
        listens = [h2.post("/mcp", *message(*LISTEN)) for _ in range(10)]
        call = ("tools/call", {"name": "echo", "arguments": {"text": "hello"}}, "echo")
        calls = [h2.post("/mcp", *message(*call, sse=sse)) for sse in (False, True) for _ in range(50)]
        h2.wait(calls)
        h2.wait(listens, until="data")
        # A refused stream (4xx) would end: the listen path would not have run.
        assert not h2.ended.intersection(listens), "an HTTP/2 listen stream was refused"
        for stream in listens:
            h2.cancel(stream)
time.sleep(5)  # idle: the timers and background tasks of a server with nothing to do
EOF

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# profile PASS [ENV=VALUE...]: one run under callgrind, its dump in
# $work/PASS.out, written when the server stops; the workload is also given
# "${workload_args[@]}".
workload_args=()
profile() {
  local pass=$1 port
  shift
  port=$(free_port)
  # The parser below reads callgrind's default output: no options from the
  # environment (`--dump-instr`, `--separate-callers` would change it).
  env VALGRIND_OPTS= "$@" valgrind --tool=callgrind --demangle=no --dump-instr=no --dump-line=yes \
    --separate-callers=0 --collect-jumps=no --callgrind-out-file="$work/$pass.out" \
    "$binary" serve --bind "127.0.0.1:$port" >"$work/$pass.log" 2>&1 &
  server=$!
  LOADTEST_DIR=$here python3 "$work/workload.py" "$port" ${workload_args[@]+"${workload_args[@]}"}
  kill "$server"; wait "$server" 2>/dev/null || true
  server=
}

profile default SWITCHYARD_DATABASE_URL="sqlite://$work/registry.db"
passes=default
if [[ -n ${PG_ADMIN_URL:-} && -n ${REDIS_URL:-} ]]; then
  psql -q "$PG_ADMIN_URL" -c "CREATE DATABASE $scratch_db" >/dev/null
  # The admin URL with the scratch database's name, its query (sslmode=…) kept.
  scratch_url=$(python3 -c 'import sys, urllib.parse as u; p = u.urlsplit(sys.argv[1]); print(u.urlunsplit(p._replace(path="/" + sys.argv[2])))' \
    "$PG_ADMIN_URL" "$scratch_db")
  profile services SWITCHYARD_DATABASE_URL="$scratch_url" SWITCHYARD_REDIS_URL="$REDIS_URL" SWITCHYARD_REDIS_PREFIX="$redis_prefix" \
    SWITCHYARD_STATE__KEYS="k1:$(head -c 32 /dev/urandom | base64)"
  passes="default services"
fi
if [[ -n ${WASM_MODULE:-} ]]; then
  upstream_port=$(free_port)
  SWITCHYARD_DATABASE_URL="sqlite://$work/upstream.db" "$binary" serve --bind "127.0.0.1:$upstream_port" \
    >"$work/upstream.log" 2>&1 &
  upstream=$!
  workload_args=("$(realpath "$WASM_MODULE")" "http://127.0.0.1:$upstream_port/mcp")
  # The upstream is on loopback, which the outbound policy refuses unless granted.
  profile plugins SWITCHYARD_DATABASE_URL="sqlite://$work/plugins.db" SWITCHYARD_UPSTREAM__ALLOWED_RANGES=127.0.0.0/8
  kill "$upstream"
  upstream=
  passes="$passes plugins"
fi

python3 - "$binary" "$work" "$out" $passes <<'EOF'
import collections, re, subprocess, sys
binary, work, out, passes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]

def self_cost(pass_name):
    """Instructions each of the binary's functions ran itself in one pass.

    Names are compressed: "(id) name" the first time, "(id)" after; `cob=`
    and `cfn=` name callees in the same two tables. A cost line counts for
    the current function, except the one after `calls=`, which is the
    callee's inclusive cost."""
    names, obs, cost = {}, {}, collections.Counter()
    ob, fn, after_call = None, None, False
    for line in open(f"{work}/{pass_name}.out", errors="replace"):
        m = re.match(r"(c?)(ob|fn)=\((\d+)\)(?: (.*))?", line.strip())
        if m:
            callee, kind, key, name = m.groups()
            table = obs if kind == "ob" else names
            if name:
                table[key] = name
            if callee:
                continue
            if kind == "ob":
                ob = obs.get(key)
            else:
                fn = names.get(key) if ob == binary else None
        elif line.startswith("calls="):
            after_call = True
        elif line[:1].isdigit() or line[:1] in "+-*":
            parts = line.split()
            if fn and not after_call and len(parts) >= 2 and parts[1].isdigit():
                # Callgrind names a function's recursive entries `name'2`.
                cost[re.sub(r"'\d+$", "", fn)] += int(parts[1])
            after_call = False
    return cost

# Each pass's functions, the most run first, after those of the passes before
# it. Addresses without a symbol ("0x...") cannot be ordered.
ordered = {}
for pass_name in passes:
    for name, _ in self_cost(pass_name).most_common():
        if not name.startswith("0x") and " " not in name:
            ordered.setdefault(name, pass_name)
# The first line names the compiler the binary was built with, as `rustc -V`
# does; the build script compares it with its own.
comment = subprocess.run(["readelf", "-p", ".comment", binary], capture_output=True, text=True).stdout
built_with = re.search(r"rustc version (\S+ \([^)]*\))", comment)
with open(out, "w") as f:
    f.write(f"# rustc {built_with.group(1) if built_with else 'unknown'}\n")
    f.write("".join(name + "\n" for name in ordered))
counts = collections.Counter(ordered.values())
print(f"{len(ordered)} functions written to {out}:", ", ".join(f"{counts[p]} from {p}" for p in passes))
EOF
