//! `calculator_arithmetic`, the example tool of the MCP architecture overview:
//! evaluates an arithmetic expression.
//!
//! Grammar (usual precedence, `^` right-associative and above unary minus):
//! ```text
//! expr    := term (("+" | "-") term)*
//! term    := unary (("*" | "/" | "%") unary)*
//! unary   := "-" unary | power
//! power   := primary ("^" unary)?
//! primary := number | "pi" | "e" | func "(" expr ")" | "(" expr ")"
//! func    := sqrt | sin | cos | tan | log | ln | abs      (log is base 10; angles in radians)
//! ```
//! A bad expression is an `isError` result naming the 1-based position.

use futures::future::BoxFuture;
use serde_json::{Map, Value, json};
use switchyard_core::plugin::PluginResult;
use switchyard_core::{CallContext, Outcome, Plugin, PluginError};

/// Longest expression accepted, in characters; bounds the work per call.
const MAX_EXPRESSION: usize = 4096;
/// Deepest nesting accepted; bounds recursion.
const MAX_DEPTH: usize = 64;

/// The calculator plugin.
#[derive(Debug, Clone, Copy, Default)]
pub struct Calculator;

impl Plugin for Calculator {
    fn id(&self) -> &str {
        "builtin.calculator"
    }

    /// Answered in the request's own code: the MCP span times it.
    fn own_span(&self) -> bool {
        false
    }

    fn tools(&self) -> Vec<Value> {
        vec![json!({
            "name": "calculator_arithmetic",
            "title": "Calculator",
            "description": "Evaluates an arithmetic expression: + - * / % ^, parentheses, unary minus, \
                sqrt, sin, cos, tan (radians), log (base 10), ln, abs, and the constants pi and e.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "expression": { "type": "string", "description": "For example: 2 * (3 + 4) ^ 2 / sqrt(16)", "maxLength": MAX_EXPRESSION }
                },
                "required": ["expression"],
                "additionalProperties": false
            },
            "outputSchema": {
                "type": "object",
                "properties": { "result": { "type": "number" } },
                "required": ["result"]
            },
            "annotations": { "readOnlyHint": true, "openWorldHint": false, "idempotentHint": true }
        })]
    }

    fn call_tool<'a>(
        &'a self,
        _name: &'a str,
        arguments: Map<String, Value>,
        _cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Outcome>> {
        let expression = arguments.get("expression").and_then(Value::as_str).unwrap_or_default().to_owned();
        Box::pin(async move {
            let value = evaluate(&expression).map_err(|e| PluginError::Tool(e.to_string()))?;
            Ok(Outcome::Complete(json!({
                "content": [{ "type": "text", "text": format_number(value) }],
                "structuredContent": { "result": value }
            })))
        })
    }
}

fn format_number(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e15 { format!("{value:.0}") } else { format!("{value}") }
}

/// Why an expression could not be evaluated.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalError {
    /// 1-based character position of the problem.
    pub position: usize,
    /// What is wrong there.
    pub message: String,
}

impl std::fmt::Display for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at position {}", self.message, self.position)
    }
}

/// Evaluates `expression`.
///
/// # Errors
/// A syntax error, an unknown name, division by zero, or a non-finite result,
/// with the position.
pub fn evaluate(expression: &str) -> Result<f64, EvalError> {
    let chars: Vec<char> = expression.chars().collect();
    if chars.len() > MAX_EXPRESSION {
        return Err(EvalError {
            position: MAX_EXPRESSION + 1,
            message: format!("expression longer than {MAX_EXPRESSION} characters"),
        });
    }
    let mut parser = Parser { chars, pos: 0, depth: 0 };
    let value = parser.expr()?;
    parser.skip_space();
    if parser.pos < parser.chars.len() {
        return Err(parser.error(format!("unexpected '{}'", parser.chars[parser.pos])));
    }
    if !value.is_finite() {
        return Err(EvalError { position: 1, message: "the result is not a finite number".into() });
    }
    Ok(value)
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn error(&self, message: impl Into<String>) -> EvalError {
        EvalError { position: self.pos + 1, message: message.into() }
    }

    fn skip_space(&mut self) {
        while self.chars.get(self.pos).is_some_and(|c| c.is_whitespace()) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_space();
        self.chars.get(self.pos).copied()
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, EvalError>) -> Result<T, EvalError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.error(format!("nesting deeper than {MAX_DEPTH}")));
        }
        let result = f(self);
        self.depth -= 1;
        result
    }

    fn expr(&mut self) -> Result<f64, EvalError> {
        self.nested(|p| {
            let mut value = p.term()?;
            loop {
                if p.eat('+') {
                    value += p.term()?;
                } else if p.eat('-') {
                    value -= p.term()?;
                } else {
                    return Ok(value);
                }
            }
        })
    }

    fn term(&mut self) -> Result<f64, EvalError> {
        let mut value = self.unary()?;
        loop {
            let op = match self.peek() {
                Some(op @ ('*' | '/' | '%')) => op,
                _ => return Ok(value),
            };
            let at = self.pos;
            self.pos += 1;
            let rhs = self.unary()?;
            if op != '*' && rhs == 0.0 {
                return Err(EvalError { position: at + 1, message: "division by zero".into() });
            }
            value = match op {
                '*' => value * rhs,
                '/' => value / rhs,
                _ => value % rhs,
            };
        }
    }

    fn unary(&mut self) -> Result<f64, EvalError> {
        if self.eat('-') { self.nested(|p| p.unary()).map(|v| -v) } else { self.power() }
    }

    fn power(&mut self) -> Result<f64, EvalError> {
        let base = self.primary()?;
        if self.eat('^') { Ok(base.powf(self.nested(|p| p.unary())?)) } else { Ok(base) }
    }

    fn primary(&mut self) -> Result<f64, EvalError> {
        match self.peek() {
            Some('(') => {
                self.pos += 1;
                let value = self.expr()?;
                if !self.eat(')') {
                    return Err(self.error("expected ')'"));
                }
                Ok(value)
            }
            Some(c) if c.is_ascii_digit() || c == '.' => self.number(),
            Some(c) if c.is_ascii_alphabetic() => self.name(),
            Some(c) => Err(self.error(format!("unexpected '{c}'"))),
            None => Err(self.error("unexpected end of expression")),
        }
    }

    fn number(&mut self) -> Result<f64, EvalError> {
        let start = self.pos;
        while self.chars.get(self.pos).is_some_and(|c| c.is_ascii_digit() || *c == '.') {
            self.pos += 1;
        }
        // An exponent: 1e3, 2.5E-4.
        if self.chars.get(self.pos).is_some_and(|c| *c == 'e' || *c == 'E')
            && self.chars.get(self.pos + 1).is_some_and(|c| c.is_ascii_digit() || *c == '-' || *c == '+')
        {
            self.pos += 2;
            while self.chars.get(self.pos).is_some_and(char::is_ascii_digit) {
                self.pos += 1;
            }
        }
        let text: String = self.chars[start..self.pos].iter().collect();
        text.parse().map_err(|_| EvalError { position: start + 1, message: format!("invalid number '{text}'") })
    }

    fn name(&mut self) -> Result<f64, EvalError> {
        let start = self.pos;
        while self.chars.get(self.pos).is_some_and(char::is_ascii_alphanumeric) {
            self.pos += 1;
        }
        let name: String = self.chars[start..self.pos].iter().collect::<String>().to_ascii_lowercase();
        let function: fn(f64) -> f64 = match name.as_str() {
            "pi" => return Ok(std::f64::consts::PI),
            "e" => return Ok(std::f64::consts::E),
            "sqrt" => f64::sqrt,
            "sin" => f64::sin,
            "cos" => f64::cos,
            "tan" => f64::tan,
            "log" => f64::log10,
            "ln" => f64::ln,
            "abs" => f64::abs,
            _ => return Err(EvalError { position: start + 1, message: format!("unknown name '{name}'") }),
        };
        if !self.eat('(') {
            return Err(self.error(format!("expected '(' after {name}")));
        }
        let argument = self.expr()?;
        if !self.eat(')') {
            return Err(self.error("expected ')'"));
        }
        if (name == "sqrt" && argument < 0.0) || ((name == "log" || name == "ln") && argument <= 0.0) {
            return Err(EvalError { position: start + 1, message: format!("{name} is undefined for {argument}") });
        }
        Ok(function(argument))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(expression: &str, expected: f64) {
        let value = evaluate(expression).unwrap();
        assert!((value - expected).abs() < 1e-9, "{expression} = {value}, expected {expected}");
    }

    #[test]
    fn precedence_and_associativity() {
        close("1 + 2 * 3", 7.0);
        close("(1 + 2) * 3", 9.0);
        close("2 ^ 3 ^ 2", 512.0);
        close("-2 ^ 2", -4.0);
        close("2 ^ -1", 0.5);
        close("10 % 4 - 8 / 4", 0.0);
        close("--3", 3.0);
        close("1.5e3 + .5", 1500.5);
    }

    #[test]
    fn functions_and_constants() {
        close("sqrt(16) + abs(-3)", 7.0);
        close("sin(pi / 2) + cos(0) + tan(0)", 2.0);
        close("log(1000) + ln(e)", 4.0);
    }

    #[test]
    fn errors_name_the_position() {
        assert_eq!(evaluate("1 + * 2").unwrap_err().position, 5);
        assert_eq!(evaluate("2 / 0").unwrap_err(), EvalError { position: 3, message: "division by zero".into() });
        assert_eq!(evaluate("foo(1)").unwrap_err().message, "unknown name 'foo'");
        assert_eq!(evaluate("(1 + 2").unwrap_err().message, "expected ')'");
        assert_eq!(evaluate("1 2").unwrap_err().position, 3);
        assert_eq!(evaluate("").unwrap_err().message, "unexpected end of expression");
        assert!(evaluate("sqrt(-1)").is_err());
        assert!(evaluate(&"(".repeat(100)).is_err(), "deep nesting is bounded");
    }
}
