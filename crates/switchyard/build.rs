//! Links the release binary with the functions a server runs placed first
//! and together (`symbol-order.txt`, written by `loadtest/symbol-order.sh`).
//!
//! The kernel keeps resident each page of code a process has run, and maps up
//! to 64 KiB around each page it faults in. In the compiler's own order the
//! functions a server runs lie spread over the whole text segment; grouped,
//! an idle server keeps a fraction of the code resident (#18's idle-memory
//! row; `loadtest memory` measures it). The order changes where code lies,
//! never what it does: a name the build no longer has is skipped.
//!
//! With a C library that reads them (glibc 2.36 and later), the relocations
//! a position-independent binary needs at start are also written packed
//! (`-z pack-relative-relocs`): 1 MiB of relocation table, read once by the
//! loader at start and then kept resident, becomes a few KiB. The binary then
//! needs glibc 2.36 where it runs (without: 2.34), as the build machine has.
//!
//! Only where the linker is known to be LLD: release builds for
//! `x86_64-unknown-linux-gnu` with a toolchain that ships it (rustup's, since
//! 1.90, links that target with its own LLD; a distribution's rustc may use
//! GNU ld, which has no `--symbol-ordering-file`) and without a linker of the
//! builder's own choosing. `SWITCHYARD_LINK_LAYOUT=off` turns both off, for a
//! binary that must start on an older glibc.
//!
//! The list's first line names the compiler it was written with. Symbol names
//! carry a hash that changes with the compiler, so a list from another one
//! matches little: the build says so in a warning.

use std::env;
use std::path::PathBuf;
use std::process::Command;

const ORDER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/symbol-order.txt");

fn main() {
    println!("cargo:rerun-if-changed=symbol-order.txt");
    println!("cargo:rerun-if-env-changed=SWITCHYARD_LINK_LAYOUT");
    let release = env::var("PROFILE").is_ok_and(|p| p == "release");
    let target = env::var("TARGET").unwrap_or_default();
    let wanted = env::var("SWITCHYARD_LINK_LAYOUT").map_or(true, |v| v != "off");
    if !(release && wanted && target == "x86_64-unknown-linux-gnu" && !own_linker() && ships_lld(&target)) {
        return;
    }
    warn_if_written_by_another_compiler();
    // `-Xlinker` pairs, not `-Wl,`: that splits its argument at commas, and
    // a checkout's path may have one.
    let mut link_args = vec![format!("--symbol-ordering-file={ORDER}"), "--no-warn-symbol-ordering".into()];
    if glibc_reads_packed_relocations() {
        link_args.extend(["-z".into(), "pack-relative-relocs".into()]);
    }
    for arg in link_args {
        println!("cargo:rustc-link-arg-bins=-Xlinker");
        println!("cargo:rustc-link-arg-bins={arg}");
    }
}

/// Whether the builder chose the linker: `target.*.linker` in cargo's
/// configuration, or a rustflag that names one.
fn own_linker() -> bool {
    let flags = env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    env::var_os("RUSTC_LINKER").is_some()
        || flags.split('\x1f').any(|flag| {
            let flag = flag.trim_start_matches("-C").trim_start_matches("link-arg=").trim_start_matches("-Wl,");
            ["linker=", "linker-flavor=", "link-self-contained=", "-fuse-ld=", "--ld-path=", "-B"]
                .iter()
                .any(|chosen| flag.starts_with(chosen))
        })
}

/// Whether this compiler ships its own LLD for `target` (rustup's does,
/// under `lib/rustlib/<target>/bin/gcc-ld`, and links with it).
fn ships_lld(target: &str) -> bool {
    rustc(&["--print", "sysroot"]).is_some_and(|sysroot| {
        PathBuf::from(sysroot).join("lib/rustlib").join(target).join("bin/gcc-ld/ld.lld").is_file()
    })
}

/// A `cargo:warning` when the list's first line (`# rustc …`, which LLD reads
/// as a comment) names another compiler than this build's.
fn warn_if_written_by_another_compiler() {
    let list = std::fs::read_to_string(ORDER).unwrap_or_default();
    let theirs = list.lines().next().and_then(|line| line.strip_prefix("# ")).unwrap_or("an unnamed compiler");
    if let Some(ours) = rustc(&["-V"])
        && ours != theirs
    {
        println!(
            "cargo:warning=symbol-order.txt was written with {theirs}, this build uses {ours}: \
             an idle server may hold about twice the memory; rerun loadtest/symbol-order.sh"
        );
    }
}

/// Whether the C library the binary is built against (this machine's: the
/// target is checked to be the host's) is glibc 2.36 or later, which loads
/// packed relocations. A binary built with them does not start on an older
/// glibc, which names the missing `GLIBC_ABI_DT_RELR`.
fn glibc_reads_packed_relocations() -> bool {
    if env::var("HOST").ok() != env::var("TARGET").ok() {
        return false;
    }
    // "glibc 2.36"
    let Some(text) = output("getconf", &["GNU_LIBC_VERSION"]) else {
        return false;
    };
    let version = text.strip_prefix("glibc ").unwrap_or("");
    let mut numbers = version.split('.').map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    (major, minor) >= (2, 36)
}

/// What the compiler cargo builds with (`RUSTC`) prints for `args`.
fn rustc(args: &[&str]) -> Option<String> {
    output(&env::var("RUSTC").unwrap_or_else(|_| "rustc".into()), args)
}

/// The trimmed standard output of `program args`, when it runs.
fn output(program: &str, args: &[&str]) -> Option<String> {
    let ran = Command::new(program).args(args).output().ok()?;
    Some(String::from_utf8_lossy(&ran.stdout).trim().to_owned())
}
