//! Built-in plugins, compiled in and enabled by name in configuration.

pub mod calculator;
pub mod echo;
pub mod fixture;

use std::sync::Arc;

use switchyard_core::Plugin;

pub use calculator::Calculator;
pub use echo::Echo;
pub use fixture::ConformanceFixture;

/// The names accepted in configuration, with what each provides.
pub const AVAILABLE: [(&str, &str); 3] = [
    ("calculator", "calculator_arithmetic: evaluates arithmetic expressions"),
    ("echo", "echo: returns its text"),
    ("conformance", "every tool, resource and prompt the MCP conformance suite calls"),
];

/// Builds the built-in plugin called `name`, if there is one.
pub fn by_name(name: &str) -> Option<Arc<dyn Plugin>> {
    Some(match name {
        "calculator" => Arc::new(Calculator),
        "echo" => Arc::new(Echo),
        "conformance" => Arc::new(ConformanceFixture::new()),
        _ => return None,
    })
}
