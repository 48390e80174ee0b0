//! Error answers: one JSON shape, `{"error": {"code", "message", "field"?, "current_version"?}}`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use switchyard_core::plugin_spec::SpecError;

/// An error answer.
#[derive(Debug)]
pub(crate) struct Problem {
    status: StatusCode,
    code: &'static str,
    message: String,
    field: Option<String>,
    current_version: Option<i64>,
}

impl Problem {
    pub(crate) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), field: None, current_version: None }
    }

    /// 422: a field of the request is invalid.
    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        let field = field.into();
        let message = format!("{field}: {}", message.into());
        Self { field: Some(field), ..Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid", message) }
    }

    /// 400: the body is not what this endpoint takes.
    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }
}

impl From<SpecError> for Problem {
    fn from(error: SpecError) -> Self {
        Self::invalid(error.field, error.reason)
    }
}

impl From<switchyard_registry::Error> for Problem {
    fn from(error: switchyard_registry::Error) -> Self {
        use switchyard_registry::Error as E;
        match error {
            E::NotFound { id } => Self::new(StatusCode::NOT_FOUND, "not_found", format!("no plugin {id}")),
            E::Conflict { id, expected, actual } => Self {
                current_version: Some(actual),
                ..Self::new(
                    StatusCode::CONFLICT,
                    "version_conflict",
                    format!("plugin {id} is at version {actual}, not {expected}; read it again and retry"),
                )
            },
            E::NamespaceTaken { namespace } => Self {
                field: Some("namespace".into()),
                ..Self::new(StatusCode::CONFLICT, "namespace_taken", format!("namespace {namespace} is taken"))
            },
            E::Invalid { field, reason } => Self::invalid(field, reason),
            E::Database(_) | E::Migration(_) => {
                tracing::error!(error = ?error, "admin request failed on the registry");
                Self::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "registry_unavailable",
                    "the registry database is unavailable; nothing was changed, retry later",
                )
            }
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(field) = self.field {
            error["field"] = json!(field);
        }
        if let Some(version) = self.current_version {
            error["current_version"] = json!(version);
        }
        (self.status, axum::Json(json!({ "error": error }))).into_response()
    }
}
