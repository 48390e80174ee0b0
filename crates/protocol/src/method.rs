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
    /// Every method with a name of its own (all but `Unknown`).
    pub const KNOWN: [Method; 18] = [
        Self::Discover,
        Self::ListTools,
        Self::CallTool,
        Self::ListResources,
        Self::ListResourceTemplates,
        Self::ReadResource,
        Self::ListPrompts,
        Self::GetPrompt,
        Self::Complete,
        Self::Listen,
        Self::GetTask,
        Self::UpdateTask,
        Self::CancelTask,
        Self::Initialize,
        Self::Ping,
        Self::SetLogLevel,
        Self::Subscribe,
        Self::Unsubscribe,
    ];

    /// Parses a method name. Values are case-sensitive.
    pub fn parse(name: &str) -> Self {
        match name {
            request::DISCOVER => Self::Discover,
            request::TOOLS_LIST => Self::ListTools,
            request::TOOLS_CALL => Self::CallTool,
            request::RESOURCES_LIST => Self::ListResources,
            request::RESOURCE_TEMPLATES_LIST => Self::ListResourceTemplates,
            request::RESOURCES_READ => Self::ReadResource,
            request::PROMPTS_LIST => Self::ListPrompts,
            request::PROMPTS_GET => Self::GetPrompt,
            request::COMPLETE => Self::Complete,
            request::LISTEN => Self::Listen,
            request::TASKS_GET => Self::GetTask,
            request::TASKS_UPDATE => Self::UpdateTask,
            request::TASKS_CANCEL => Self::CancelTask,
            request::INITIALIZE => Self::Initialize,
            request::PING => Self::Ping,
            request::SET_LOG_LEVEL => Self::SetLogLevel,
            request::SUBSCRIBE => Self::Subscribe,
            request::UNSUBSCRIBE => Self::Unsubscribe,
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
            Self::Discover => request::DISCOVER,
            Self::ListTools => request::TOOLS_LIST,
            Self::CallTool => request::TOOLS_CALL,
            Self::ListResources => request::RESOURCES_LIST,
            Self::ListResourceTemplates => request::RESOURCE_TEMPLATES_LIST,
            Self::ReadResource => request::RESOURCES_READ,
            Self::ListPrompts => request::PROMPTS_LIST,
            Self::GetPrompt => request::PROMPTS_GET,
            Self::Complete => request::COMPLETE,
            Self::Listen => request::LISTEN,
            Self::GetTask => request::TASKS_GET,
            Self::UpdateTask => request::TASKS_UPDATE,
            Self::CancelTask => request::TASKS_CANCEL,
            Self::Initialize => request::INITIALIZE,
            Self::Ping => request::PING,
            Self::SetLogLevel => request::SET_LOG_LEVEL,
            Self::Subscribe => request::SUBSCRIBE,
            Self::Unsubscribe => request::UNSUBSCRIBE,
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

/// Names of the requests a client sends: the one place they are spelled
/// (the [`Method`] enum parses them; a client, such as the upstream plugin,
/// sends them).
pub mod request {
    /// `server/discover`
    pub const DISCOVER: &str = "server/discover";
    /// `tools/list`
    pub const TOOLS_LIST: &str = "tools/list";
    /// `tools/call`
    pub const TOOLS_CALL: &str = "tools/call";
    /// `resources/list`
    pub const RESOURCES_LIST: &str = "resources/list";
    /// `resources/templates/list`
    pub const RESOURCE_TEMPLATES_LIST: &str = "resources/templates/list";
    /// `resources/read`
    pub const RESOURCES_READ: &str = "resources/read";
    /// `prompts/list`
    pub const PROMPTS_LIST: &str = "prompts/list";
    /// `prompts/get`
    pub const PROMPTS_GET: &str = "prompts/get";
    /// `completion/complete`
    pub const COMPLETE: &str = "completion/complete";
    /// `subscriptions/listen`
    pub const LISTEN: &str = "subscriptions/listen";
    /// `tasks/get`
    pub const TASKS_GET: &str = "tasks/get";
    /// `tasks/update`
    pub const TASKS_UPDATE: &str = "tasks/update";
    /// `tasks/cancel`
    pub const TASKS_CANCEL: &str = "tasks/cancel";
    /// `initialize`
    pub const INITIALIZE: &str = "initialize";
    /// `ping`
    pub const PING: &str = "ping";
    /// `logging/setLevel`
    pub const SET_LOG_LEVEL: &str = "logging/setLevel";
    /// `resources/subscribe`
    pub const SUBSCRIBE: &str = "resources/subscribe";
    /// `resources/unsubscribe`
    pub const UNSUBSCRIBE: &str = "resources/unsubscribe";
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
            assert!(Method::KNOWN.contains(&method), "{name} missing from Method::KNOWN");
        }
        assert_eq!(Method::KNOWN.len(), 18, "every name above, once");
    }

    #[test]
    fn method_names_are_case_sensitive() {
        assert_eq!(Method::parse("TOOLS/CALL"), Method::Unknown("TOOLS/CALL".into()));
    }
}
