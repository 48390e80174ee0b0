//! The link order the build script hands to the linker (`symbol-order.txt`,
//! written by `loadtest/symbol-order.sh`) is in the form the linker matches:
//! one symbol a line, as the symbol table spells it, after a first line
//! naming the compiler. The build passes `--no-warn-symbol-ordering`, so that
//! names a later build lacks are skipped in silence: a demangled or annotated
//! list would match nothing, and the idle server would quietly hold twice the
//! memory. Whether the names still match a build is for
//! `loadtest/symbol-order.sh --check BIN`, which needs a release build.

#[test]
fn the_link_order_names_symbols_as_the_linker_spells_them() {
    let order = include_str!("../symbol-order.txt");
    let mut lines = order.lines();
    let compiler = lines.next().unwrap_or_default();
    assert!(compiler.starts_with("# rustc "), "the first line names the compiler, as `rustc -V` does: {compiler:?}");
    let names: Vec<&str> = lines.collect();
    assert!(names.len() > 1000, "the order names {} functions; rerun loadtest/symbol-order.sh", names.len());
    for name in &names {
        assert!(
            !name.is_empty() && !name.contains(char::is_whitespace) && !name.contains("::"),
            "not a symbol as the symbol table spells it: {name:?}"
        );
        // Callgrind's own additions: an address without a symbol, a
        // recursion depth (`name'2`), a caller (`name'caller`), a comment.
        assert!(
            !name.starts_with("0x") && !name.contains('\'') && !name.contains('#'),
            "not a function's name: {name:?}"
        );
    }
    // The request path's own functions, mangled (legacy `_ZN` or v0 `_R`).
    for needle in ["switchyard_http", "switchyard_core", "hyper"] {
        assert!(
            names.iter().any(|n| (n.starts_with("_ZN") || n.starts_with("_R")) && n.contains(needle)),
            "no function of {needle} in the order: was it written from a release build of switchyard?"
        );
    }
    let unique: std::collections::HashSet<&&str> = names.iter().collect();
    assert_eq!(unique.len(), names.len(), "a name is listed twice");
}
