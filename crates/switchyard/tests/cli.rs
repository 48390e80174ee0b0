//! The binary's command line: configuration errors exit with 64 before any
//! port is bound, naming every problem; a valid file passes `check-config`;
//! `stdio` answers on stdout.

use std::io::Write as _;
use std::process::{Command, Stdio};

fn switchyard() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_switchyard"));
    // Start from a clean slate: the developer's own SWITCHYARD_* must not leak in.
    for (key, _) in std::env::vars().filter(|(k, _)| k.starts_with("SWITCHYARD_")) {
        command.env_remove(key);
    }
    command
}

#[test]
fn bad_configuration_exits_64_and_names_every_problem() {
    let output = switchyard()
        .args(["serve", "--bind", "not-an-address"])
        .env("SWITCHYARD_SERVER__CALL_TIMEOUT", "soon")
        .env("SWITCHYARD_NO_SUCH_SETTING", "1")
        .output()
        .expect("run switchyard");
    assert_eq!(output.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("no_such_setting"), "{stderr}");

    let output = switchyard()
        .args(["check-config"])
        .env("SWITCHYARD_BIND", "nowhere")
        .env("SWITCHYARD_PLUGINS", "nope")
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(64));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("bind") && stderr.contains("nope"), "both problems are reported: {stderr}");
}

#[test]
fn a_config_file_is_read_and_the_environment_wins() {
    let dir = std::env::temp_dir().join(format!("switchyard-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("switchyard.toml");
    std::fs::write(&file, "bind = \"127.0.0.1:9\"\nplugins = [\"echo\"]\n[http]\nmax_body_bytes = 2048\n[state]\nkeys = [\"k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\"]\n").unwrap();
    let ok = switchyard().args(["check-config", "--config"]).arg(&file).output().unwrap();
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));

    std::fs::write(&file, "plugins = [\"echo\"]\n[http]\nmax_body_bytes = \"big\"\n").unwrap();
    let bad = switchyard().args(["check-config", "--config"]).arg(&file).output().unwrap();
    assert_eq!(bad.status.code(), Some(64));
    // The environment overrides the file.
    let fixed = switchyard()
        .args(["check-config", "--config"])
        .arg(&file)
        .env("SWITCHYARD_HTTP__MAX_BODY_BYTES", "4096")
        .output()
        .unwrap();
    assert!(fixed.status.success(), "{}", String::from_utf8_lossy(&fixed.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn migrate_creates_the_sqlite_registry_and_is_idempotent() {
    let dir = std::env::temp_dir().join(format!("switchyard-migrate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite://{}", dir.join("registry.db").display());
    for _ in 0..2 {
        let output = switchyard().arg("migrate").env("SWITCHYARD_DATABASE_URL", &url).output().unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "migrations applied; catalog version 0");
    }
    assert!(dir.join("registry.db").exists());
    let unreachable = switchyard()
        .arg("migrate")
        .env("SWITCHYARD_DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .output()
        .unwrap();
    assert_eq!(unreachable.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unreachable.stderr).contains("registry database error"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn stdio_finishes_requests_in_flight_at_the_end_of_input() {
    let mut child = switchyard()
        .arg("stdio")
        .env("SWITCHYARD_FIXTURE", "conformance")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("run switchyard stdio");
    let mut stdin = child.stdin.take().unwrap();
    // Takes about 100 ms; the input ends at once.
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{{"name":"test_tool_with_progress","arguments":{{}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}},"progressToken":1}}}}}}"#
    )
    .unwrap();
    drop(stdin);
    let output = child.wait_with_output().unwrap();
    let lines: Vec<serde_json::Value> =
        String::from_utf8(output.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let progress = lines.iter().filter(|m| m["method"] == "notifications/progress").count();
    assert_eq!(progress, 3, "{lines:?}");
    assert_eq!(lines.last().unwrap()["id"], "slow");
    assert!(lines.last().unwrap()["result"]["content"].is_array());
}

#[test]
fn stdio_answers_on_stdout_and_logs_on_stderr() {
    let mut child = switchyard()
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run switchyard stdio");
    let mut stdin = child.stdin.take().unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"calculator_arithmetic","arguments":{{"expression":"6*7"}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{{}}}}}}}}"#
    )
    .unwrap();
    drop(stdin); // end of input: the server answers and exits
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    let reply: serde_json::Value = serde_json::from_str(stdout.lines().next().expect("one line")).unwrap();
    assert_eq!(reply["result"]["structuredContent"]["result"], 42.0);
    assert_eq!(stdout.lines().count(), 1, "nothing but JSON-RPC on stdout");
}
