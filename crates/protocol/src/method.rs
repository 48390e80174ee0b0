//! Method names, matched as strings once, here.

/// A JSON-RPC method a client may send, parsed from its name.
///
/// `Unknown` keeps the name so the error can echo it; it is a variant, never a panic.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Method {
    /// `server/discover`
    Discover,
    /// `tools/list`
    ListTools,
    /// `tools/call`
    CallTool,
    /// `resources/list`
    ListResources,
    /// `resources/templates/list`
    ListResourceTemplates,
    /// `resources/read`
    ReadResource,
    /// `prompts/list`
    ListPrompts,
    /// `prompts/get`
    GetPrompt,
    /// `completion/complete`
    Complete,
    /// `subscriptions/listen`
    Listen,
    /// `tasks/get` (Tasks extension)
    GetTask,
    /// `tasks/update` (Tasks extension)
    UpdateTask,
    /// `tasks/cancel` (Tasks extension)
    CancelTask,
    /// `initialize` (legacy handshake; removed in 2026-07-28)
    Initialize,
    /// `ping` (legacy; removed in 2026-07-28)
    Ping,
    /// `logging/setLevel` (legacy; removed in 2026-07-28)
    SetLogLevel,
    /// `resources/subscribe` (legacy; removed in 2026-07-28)
    Subscribe,
    /// `resources/unsubscribe` (legacy; removed in 2026-07-28)
    Unsubscribe,
    /// Any other name.
    Unknown(String),
}

impl Method {
    /// Parses a method name. Values are case-sensitive.
    pub fn parse(name: &str) -> Self {
        match name {
            "server/discover" => Self::Discover,
            "tools/list" => Self::ListTools,
            "tools/call" => Self::CallTool,
            "resources/list" => Self::ListResources,
            "resources/templates/list" => Self::ListResourceTemplates,
            "resources/read" => Self::ReadResource,
            "prompts/list" => Self::ListPrompts,
            "prompts/get" => Self::GetPrompt,
            "completion/complete" => Self::Complete,
            "subscriptions/listen" => Self::Listen,
            "tasks/get" => Self::GetTask,
            "tasks/update" => Self::UpdateTask,
            "tasks/cancel" => Self::CancelTask,
            "initialize" => Self::Initialize,
            "ping" => Self::Ping,
            "logging/setLevel" => Self::SetLogLevel,
            "resources/subscribe" => Self::Subscribe,
            "resources/unsubscribe" => Self::Unsubscribe,
            other => Self::Unknown(other.to_owned()),
        }
    }

    /// The wire name.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Unknown(name) => name,
            known => known.known_name().unwrap_or_default(),
        }
    }

    fn known_name(&self) -> Option<&'static str> {
        Some(match self {
            Self::Discover => "server/discover",
            Self::ListTools => "tools/list",
            Self::CallTool => "tools/call",
            Self::ListResources => "resources/list",
            Self::ListResourceTemplates => "resources/templates/list",
            Self::ReadResource => "resources/read",
            Self::ListPrompts => "prompts/list",
            Self::GetPrompt => "prompts/get",
            Self::Complete => "completion/complete",
            Self::Listen => "subscriptions/listen",
            Self::GetTask => "tasks/get",
            Self::UpdateTask => "tasks/update",
            Self::CancelTask => "tasks/cancel",
            Self::Initialize => "initialize",
            Self::Ping => "ping",
            Self::SetLogLevel => "logging/setLevel",
            Self::Subscribe => "resources/subscribe",
            Self::Unsubscribe => "resources/unsubscribe",
            Self::Unknown(_) => return None,
        })
    }

    /// The wire name of a known method, `"other"` for any other: a bounded
    /// vocabulary for metric labels, which must never carry client input.
    pub fn label(&self) -> &'static str {
        self.known_name().unwrap_or("other")
    }

    /// The `params` member whose value the `Mcp-Name` header must mirror, for
    /// the methods that require that header (SEP-2243, SEP-2663).
    pub fn name_param(&self) -> Option<&'static str> {
        match self {
            Self::CallTool | Self::GetPrompt => Some("name"),
            Self::ReadResource => Some("uri"),
            Self::GetTask | Self::UpdateTask | Self::CancelTask => Some("taskId"),
            _ => None,
        }
    }

    /// Whether a result of this method may be `input_required` (MRTR).
    pub fn allows_input_required(&self) -> bool {
        matches!(self, Self::CallTool | Self::GetPrompt | Self::ReadResource)
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Names of the notifications the server sends.
pub mod notification {
    /// Progress of a request, on that request's response stream only.
    pub const PROGRESS: &str = "notifications/progress";
    /// A log message, only when the request set `_meta` `logLevel`.
    pub const MESSAGE: &str = "notifications/message";
    /// Cancels a request (stdio; the client's cancel of a listen stream).
    pub const CANCELLED: &str = "notifications/cancelled";
    /// The first frame of every listen stream.
    pub const SUBSCRIPTIONS_ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
    /// The tool list changed.
    pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
    /// The prompt list changed.
    pub const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
    /// The resource list changed.
    pub const RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
    /// A subscribed resource changed.
    pub const RESOURCES_UPDATED: &str = "notifications/resources/updated";
    /// A task named on a listen stream changed (Tasks extension); the params
    /// are the task as `tasks/get` returns it.
    pub const TASKS: &str = "notifications/tasks";
    /// A legacy client finished its handshake; accepted and dropped.
    pub const INITIALIZED: &str = "notifications/initialized";
}

/// Methods of requests the server asks the client to run, carried inside an
/// `InputRequiredResult` (MRTR), never sent as JSON-RPC requests.
pub mod input {
    /// Elicitation.
    pub const ELICIT: &str = "elicitation/create";
    /// Sampling (deprecated feature).
    pub const CREATE_MESSAGE: &str = "sampling/createMessage";
    /// Roots (deprecated feature).
    pub const LIST_ROOTS: &str = "roots/list";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_known_method_round_trips() {
        for name in [
            "server/discover",
            "tools/list",
            "tools/call",
            "resources/list",
            "resources/templates/list",
            "resources/read",
            "prompts/list",
            "prompts/get",
            "completion/complete",
            "subscriptions/listen",
            "tasks/get",
            "tasks/update",
            "tasks/cancel",
            "initialize",
            "ping",
            "logging/setLevel",
            "resources/subscribe",
            "resources/unsubscribe",
        ] {
            let method = Method::parse(name);
            assert!(!matches!(method, Method::Unknown(_)), "{name}");
            assert_eq!(method.as_str(), name);
        }
    }

    #[test]
    fn method_names_are_case_sensitive() {
        assert_eq!(Method::parse("TOOLS/CALL"), Method::Unknown("TOOLS/CALL".into()));
    }
}
