//! A unit converter as a Switchyard WASM plugin: length, mass, volume,
//! temperature, speed and data sizes, with a structured result.

use serde::{Deserialize, Serialize};
use switchyard_guest::{Plugin, Tool, ToolResult, json};

/// Units by dimension, as (name, factor to the dimension's base unit).
/// Temperature is affine and handled apart.
const UNITS: &[(&str, &[(&str, f64)])] = &[
    (
        "length",
        &[
            ("m", 1.0),
            ("km", 1000.0),
            ("cm", 0.01),
            ("mm", 0.001),
            ("mi", 1609.344),
            ("yd", 0.9144),
            ("ft", 0.3048),
            ("in", 0.0254),
            ("nmi", 1852.0),
        ],
    ),
    (
        "mass",
        &[
            ("kg", 1.0),
            ("g", 0.001),
            ("mg", 1e-6),
            ("t", 1000.0),
            ("lb", 0.453_592_37),
            ("oz", 0.028_349_523_125),
            ("st", 6.350_293_18),
        ],
    ),
    (
        "volume",
        &[
            ("l", 1.0),
            ("ml", 0.001),
            ("m3", 1000.0),
            ("gal", 3.785_411_784),
            ("qt", 0.946_352_946),
            ("pt", 0.473_176_473),
            ("floz", 0.029_573_529_562_5),
        ],
    ),
    ("speed", &[("m/s", 1.0), ("km/h", 1.0 / 3.6), ("mph", 0.447_04), ("kn", 1852.0 / 3600.0)]),
    (
        "data",
        &[
            ("B", 1.0),
            ("kB", 1e3),
            ("MB", 1e6),
            ("GB", 1e9),
            ("KiB", 1024.0),
            ("MiB", 1_048_576.0),
            ("GiB", 1_073_741_824.0),
        ],
    ),
];
const TEMPERATURES: &[&str] = &["C", "F", "K"];

fn plugin() -> Plugin {
    Plugin::new().deferred_tool("convert", convert_tool, convert)
}

/// Built only when the host asks for the tools: a call needs the handler alone.
fn convert_tool() -> Tool {
    let mut units: Vec<&str> = UNITS.iter().flat_map(|(_, u)| u.iter().map(|(n, _)| *n)).collect();
    units.extend(TEMPERATURES);
    Tool::new("convert", "Converts a value between units of length, mass, volume, speed, data size or temperature.")
        .title("Unit converter")
        .annotations(json!({"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false}))
        .input_schema(json!({
            "type": "object",
            "properties": {
                "value": {"type": "number", "description": "The amount to convert."},
                "from": {"type": "string", "enum": units, "description": "The unit of value."},
                "to": {"type": "string", "enum": units, "description": "The unit to convert to."}
            },
            "required": ["value", "from", "to"],
            "additionalProperties": false
        }))
        .output_schema(json!({
            "type": "object",
            "properties": {
                "value": {"type": "number"},
                "unit": {"type": "string"},
                "dimension": {"type": "string"}
            },
            "required": ["value", "unit", "dimension"]
        }))
}

/// A call's arguments, read straight from its JSON (the host has checked
/// them against the input schema already).
#[derive(Deserialize)]
struct Convert {
    value: f64,
    from: String,
    to: String,
}

/// The structured result, written as JSON without a map being built.
#[derive(Serialize)]
struct Converted<'a> {
    value: f64,
    unit: &'a str,
    dimension: &'static str,
}

fn convert(args: Convert) -> Result<ToolResult, String> {
    let (dimension, value) = convert_value(args.value, &args.from, &args.to)?;
    Ok(ToolResult::structured(Converted { value, unit: &args.to, dimension }))
}

/// Converts `value` from one unit to another of the same dimension.
fn convert_value(value: f64, from: &str, to: &str) -> Result<(&'static str, f64), String> {
    if TEMPERATURES.contains(&from) || TEMPERATURES.contains(&to) {
        let kelvin = match from {
            "C" => value + 273.15,
            "F" => (value - 32.0) * 5.0 / 9.0 + 273.15,
            "K" => value,
            _ => return Err(format!("cannot convert {from} to the temperature {to}")),
        };
        if kelvin < 0.0 {
            return Err("that is below absolute zero".into());
        }
        let out = match to {
            "C" => kelvin - 273.15,
            "F" => (kelvin - 273.15) * 9.0 / 5.0 + 32.0,
            "K" => kelvin,
            _ => return Err(format!("cannot convert the temperature {from} to {to}")),
        };
        return Ok(("temperature", out));
    }
    for (dimension, units) in UNITS {
        let factor = |unit: &str| units.iter().find(|(n, _)| *n == unit).map(|(_, f)| *f);
        match (factor(from), factor(to)) {
            (Some(a), Some(b)) => return Ok((dimension, value * a / b)),
            (Some(_), None) | (None, Some(_)) => {
                return Err(format!("cannot convert {from} to {to}: different dimensions"));
            }
            (None, None) => {}
        }
    }
    Err(format!("unknown units {from} and {to}"))
}

switchyard_guest::export_plugin!(plugin);

// A call allocates a few dozen small blocks: taken by moving a pointer, as
// the instance ends with the call (#18: the C library's allocator was about a
// quarter of this module's own work).
#[cfg(all(target_family = "wasm", not(target_feature = "atomics")))]
#[global_allocator]
static ALLOCATOR: switchyard_guest::CallArena = switchyard_guest::CallArena;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts() {
        let (d, v) = convert_value(1.0, "mi", "km").unwrap();
        assert_eq!(d, "length");
        assert!((v - 1.609_344).abs() < 1e-9);
        assert!((convert_value(100.0, "C", "F").unwrap().1 - 212.0).abs() < 1e-9);
        assert!(convert_value(1.0, "kg", "m").is_err());
        assert!(convert_value(-500.0, "C", "K").is_err());
    }
}
