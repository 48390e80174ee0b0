//! Test artifacts built from source: the example WASM plugins (compiled for
//! `wasm32-wasip1` exactly as a plugin author would), and the path of the
//! `switchyard` binary for tests that drive its command line.

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
