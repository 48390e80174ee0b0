//! Plugin kinds: each turns a spec into a [`switchyard_core::Plugin`].
//!
//! Today this crate holds the built-in kind ([`builtin`]): plugins compiled
//! into the binary and switched on by configuration. The WASM and upstream
//! MCP kinds (TODO(#3)) will sit beside it behind the same trait. This crate
//! knows no inbound HTTP and no SQL: the binary hands it specs and hands the
//! plugins it builds to `core`.

pub mod builtin;
