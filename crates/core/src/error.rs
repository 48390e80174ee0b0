//! The one place that decides how a failure reaches the client: a JSON-RPC
//! error, or a tool result with `isError: true` that the model can read and
//! correct itself from (SEP-1303).

use serde_json::{Value, json};
use switchyard_protocol::ErrorObject;

use crate::plugin::PluginError;
use crate::state::OpenError;

/// An error and its causes on one line, `outer: cause: root`: many errors
/// (reqwest's, sqlx's) hide the cause that explains them.
pub fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// What can go wrong while serving one request.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A protocol error decided before dispatch (bad `_meta`, version, method).
    #[error("{0}")]
    Protocol(ErrorObject),
    /// No tool of that name.
    #[error("unknown tool {0}")]
    UnknownTool(String),
    /// No prompt of that name.
    #[error("unknown prompt {0}")]
    UnknownPrompt(String),
    /// No resource at that URI.
    #[error("resource not found: {0}")]
    ResourceNotFound(String),
    /// A parameter has the wrong shape for its method.
    #[error("invalid params: {0}")]
    Params(#[from] switchyard_protocol::ParamsError),
    /// A list cursor this server did not mint (or one from another list).
    #[error("invalid cursor")]
    InvalidCursor,
    /// A prompt was asked for without the arguments it requires.
    #[error("prompt {prompt} requires argument(s): {}", .missing.join(", "))]
    MissingPromptArguments {
        /// The prompt.
        prompt: String,
        /// The required arguments that are missing.
        missing: Vec<String>,
    },
    /// A listen stream subscribes to more than one stream may: the message
    /// names the bound.
    #[error("{0}")]
    TooManySubscriptions(String),
    /// `requestState` did not open.
    #[error("invalid requestState")]
    RequestState(#[source] OpenError),
    /// Tool arguments failed `inputSchema`: the model should see why.
    #[error("invalid arguments for {tool}")]
    InvalidArguments {
        /// The tool.
        tool: String,
        /// What failed, by JSON pointer.
        problems: Vec<String>,
    },
    /// The plugin took longer than its deadline.
    #[error("{tool} timed out after {seconds} s")]
    Timeout {
        /// The tool, prompt or resource.
        tool: String,
        /// The deadline, in seconds.
        seconds: u64,
    },
    /// A plugin failed.
    #[error("plugin {plugin} failed")]
    Plugin {
        /// The plugin id.
        plugin: String,
        /// The failure.
        #[source]
        source: PluginError,
    },
    /// The caller's scopes do not cover what the item needs: a 403 step-up
    /// challenge over HTTP.
    #[error("insufficient scope for {target}")]
    InsufficientScope {
        /// The tool, prompt or resource.
        target: String,
        /// The scopes it needs.
        refusal: crate::policy::InsufficientScope,
    },
    /// The caller holds its share of a bounded resource already (listen
    /// streams): `-32029`, 429 over HTTP. The message names the bound.
    #[error("{0}")]
    OverLimit(String),
    /// The task store could not be used; logged, and `-32603` to the client.
    #[error("task store")]
    TaskStore(#[source] crate::tasks::StoreError),
    /// No task with that id for this caller (or it expired): `-32602`.
    #[error("unknown task {0}")]
    UnknownTask(String),
    /// The tool's `structuredContent` does not match its `outputSchema`: our
    /// (or the plugin's) bug, reported to the model as a failed call.
    #[error("{tool} returned output that does not match its outputSchema")]
    InvalidOutput {
        /// The tool.
        tool: String,
        /// What failed.
        problems: Vec<String>,
    },
}

/// A crate-local result.
pub type Result<T> = std::result::Result<T, Error>;

/// How an error is delivered.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery {
    /// A JSON-RPC error response.
    Rpc(ErrorObject),
    /// A failure the model should read: a `CallToolResult` with `isError:
    /// true` for `tools/call` (see [`Delivery::tool_result`]); for the other
    /// methods, which have no in-band failure, an internal error with this message.
    ToolError(String),
}

impl Error {
    /// Decides the delivery; no side effects. Internal details are never
    /// sent: whoever turns the error into an answer logs them, once, with
    /// [`Error::log_internal`].
    pub fn delivery(&self) -> Delivery {
        match self {
            Self::Protocol(error) => Delivery::Rpc(error.clone()),
            Self::UnknownTool(name) => Delivery::Rpc(
                ErrorObject::invalid_params(format!("Unknown tool: {name}")).with_data(json!({ "name": name })),
            ),
            Self::UnknownPrompt(name) => Delivery::Rpc(
                ErrorObject::invalid_params(format!("Unknown prompt: {name}")).with_data(json!({ "name": name })),
            ),
            Self::ResourceNotFound(uri) => {
                Delivery::Rpc(ErrorObject::invalid_params("Resource not found").with_data(json!({ "uri": uri })))
            }
            Self::Params(why) => Delivery::Rpc(ErrorObject::invalid_params(why.to_string())),
            Self::InvalidCursor => Delivery::Rpc(ErrorObject::invalid_params("Invalid cursor")),
            Self::MissingPromptArguments { .. } | Self::TooManySubscriptions(_) => {
                Delivery::Rpc(ErrorObject::invalid_params(self.to_string()))
            }
            Self::OverLimit(why) => {
                Delivery::Rpc(ErrorObject::new(switchyard_protocol::error::RATE_LIMITED, why.clone()))
            }
            Self::InsufficientScope { target, refusal } => Delivery::Rpc(refusal.to_error(target)),
            Self::TaskStore(_) => Delivery::Rpc(ErrorObject::internal()),
            Self::UnknownTask(id) => Delivery::Rpc(
                ErrorObject::invalid_params(format!("Unknown task: {id}")).with_data(json!({ "taskId": id })),
            ),
            Self::RequestState(why) => {
                Delivery::Rpc(ErrorObject::invalid_params(format!("Invalid requestState: {why}")))
            }
            Self::InvalidArguments { tool, problems } => {
                Delivery::ToolError(format!("Invalid arguments for tool {tool}: {}", problems.join("; ")))
            }
            Self::Timeout { .. } => Delivery::ToolError(self.to_string()),
            Self::InvalidOutput { tool, .. } => Delivery::ToolError(format!("Tool {tool} produced invalid output")),
            Self::Plugin { source, .. } => match source {
                PluginError::Tool(message) => Delivery::ToolError(message.clone()),
                PluginError::InvalidParams(message) => Delivery::Rpc(ErrorObject::invalid_params(message.clone())),
                PluginError::ResourceNotFound { uri } => Self::ResourceNotFound(uri.clone()).delivery(),
                PluginError::MissingCapability(capability) => {
                    Delivery::Rpc(ErrorObject::missing_capability(capability.as_required()))
                }
                PluginError::Internal(_) => Delivery::Rpc(ErrorObject::internal()),
            },
        }
    }

    /// For a refusal for lack of scopes, the scopes needed: what a
    /// transport's challenge names.
    pub fn refusal(&self) -> Option<crate::policy::InsufficientScope> {
        match self {
            Self::InsufficientScope { refusal, .. } => Some(refusal.clone()),
            _ => None,
        }
    }

    /// Logs what [`Error::delivery`] keeps from the client (a store's or a
    /// plugin's internal failure, an output that breaks its schema); the
    /// rest is the client's own doing and logs nothing.
    pub fn log_internal(&self) {
        match self {
            Self::TaskStore(cause) => tracing::error!(error = %cause, "task store failed"),
            // The problems quote the output itself, which may hold user
            // data: only their number goes to the log.
            Self::InvalidOutput { tool, problems } => {
                tracing::error!(tool = %tool, problems = problems.len(), "tool output does not match its outputSchema");
            }
            Self::Plugin { plugin, source: PluginError::Internal(cause) } => {
                tracing::error!(plugin = %plugin, error = %cause, "plugin failed");
            }
            _ => {}
        }
    }
}

impl From<ErrorObject> for Error {
    fn from(error: ErrorObject) -> Self {
        Self::Protocol(error)
    }
}

impl Delivery {
    /// The `CallToolResult` reporting a failure to the model.
    pub fn tool_result(message: &str) -> Value {
        json!({ "content": [{ "type": "text", "text": message }], "isError": true })
    }
}
