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
//! loader at start and then kept resident, becomes a few KiB.
//!
//! Only where the linker is known to be LLD, which is Rust's default for
//! x86_64 Linux since 1.90: release builds for `x86_64-unknown-linux-gnu`
//! without a linker of the builder's own choosing (GNU ld has no
//! `--symbol-ordering-file`).

use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=symbol-order.txt");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let release = env::var("PROFILE").is_ok_and(|p| p == "release");
    let default_lld = env::var("TARGET").is_ok_and(|t| t == "x86_64-unknown-linux-gnu");
    let own_linker = env::var_os("RUSTC_LINKER").is_some()
        || env::var("CARGO_ENCODED_RUSTFLAGS").is_ok_and(|flags| {
            ["linker", "fuse-ld", "link-self-contained"].iter().any(|chosen| flags.contains(chosen))
        });
    if release && default_lld && !own_linker {
        let order = concat!(env!("CARGO_MANIFEST_DIR"), "/symbol-order.txt");
        println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={order}");
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
        if glibc_reads_packed_relocations() {
            println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
        }
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
    let Ok(output) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    // "glibc 2.36"
    let text = String::from_utf8_lossy(&output.stdout);
    let version = text.trim().strip_prefix("glibc ").unwrap_or("");
    let mut numbers = version.split('.').map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
    (major, minor) >= (2, 36)
}
