//! The link order the build script hands to the linker (`symbol-order.txt`,
//! written by `loadtest/symbol-order.sh`) is in the form the linker matches:
//! one symbol a line, as the symbol table spells it. A demangled or annotated
//! list would match nothing, and the linker says nothing about names it
//! skips, so the idle server would quietly hold three times the code.

#[test]
fn the_link_order_names_symbols_as_the_linker_spells_them() {
    let order = include_str!("../symbol-order.txt");
    let names: Vec<&str> = order.lines().collect();
    assert!(names.len() > 1000, "the order names {} functions; rerun loadtest/symbol-order.sh", names.len());
    for name in &names {
        assert!(
            !name.is_empty() && !name.contains(char::is_whitespace) && !name.contains("::"),
            "not a symbol as the symbol table spells it: {name:?}"
        );
        assert!(!name.starts_with("0x") && !name.ends_with('\''), "not a function's name: {name:?}");
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
