//! [`Namespaced`]: a registered plugin's tools and prompts published as
//! `{namespace}_{name}`, as MCP hosts do to keep servers from colliding.
//! Resources keep their URIs: a URI is already global.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{Map, Value};
use switchyard_core::plugin::{CompletionRef, PluginResult, TaskRequest};
use switchyard_core::{CachePolicy, CallContext, Outcome, Plugin, PluginError};

/// A plugin whose tool and prompt names carry its namespace.
pub struct Namespaced {
    id: String,
    prefix: String,
    inner: Arc<dyn Plugin>,
    scopes: Vec<String>,
}

impl Namespaced {
    /// Publishes `inner` under `namespace`, identified as `id` (the registry's plugin id).
    pub fn new(id: &str, namespace: &str, inner: Arc<dyn Plugin>) -> Self {
        Self { id: id.to_owned(), prefix: format!("{namespace}_"), inner, scopes: Vec::new() }
    }

    /// Requires `scopes` of callers, for everything the plugin offers (the
    /// registry record's scopes).
    #[must_use]
    pub fn with_scopes(mut self, scopes: Vec<String>) -> Self {
        self.scopes = scopes;
        self
    }

    /// The published name of one of the plugin's own names.
    pub fn published(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    fn rename(&self, mut definitions: Vec<Value>) -> Vec<Value> {
        for definition in &mut definitions {
            if let Some(name) = definition.get("name").and_then(Value::as_str) {
                let published = self.published(name);
                definition["name"] = Value::String(published);
            }
        }
        definitions
    }

    fn local<'a>(&self, name: &'a str) -> PluginResult<&'a str> {
        name.strip_prefix(&self.prefix).ok_or_else(|| PluginError::InvalidParams(format!("Unknown name: {name}")))
    }
}

impl Plugin for Namespaced {
    fn id(&self) -> &str {
        &self.id
    }

    fn tools(&self) -> Vec<Value> {
        self.rename(self.inner.tools())
    }

    fn own_span(&self) -> bool {
        self.inner.own_span()
    }

    fn resources(&self) -> Vec<Value> {
        self.inner.resources()
    }

    fn resource_templates(&self) -> Vec<Value> {
        self.inner.resource_templates()
    }

    fn prompts(&self) -> Vec<Value> {
        self.rename(self.inner.prompts())
    }

    fn cache_policy(&self) -> Option<CachePolicy> {
        self.inner.cache_policy()
    }

    fn required_scopes(&self) -> &[String] {
        &self.scopes
    }

    fn task_support(&self, tool: &str) -> switchyard_core::tasks::TaskSupport {
        self.local(tool).map_or(switchyard_core::tasks::TaskSupport::Forbidden, |local| self.inner.task_support(local))
    }

    fn call_tool<'a>(
        &'a self,
        name: &'a str,
        arguments: Map<String, Value>,
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Outcome>> {
        match self.local(name) {
            Ok(local) => self.inner.call_tool(local, arguments, cx),
            Err(error) => Box::pin(async move { Err(error) }),
        }
    }

    fn read_resource<'a>(&'a self, uri: &'a str, cx: CallContext) -> BoxFuture<'a, PluginResult<Outcome>> {
        self.inner.read_resource(uri, cx)
    }

    fn get_prompt<'a>(
        &'a self,
        name: &'a str,
        arguments: Map<String, Value>,
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Outcome>> {
        match self.local(name) {
            Ok(local) => self.inner.get_prompt(local, arguments, cx),
            Err(error) => Box::pin(async move { Err(error) }),
        }
    }

    fn task<'a>(
        &'a self,
        id: &'a str,
        request: TaskRequest<'a>,
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Value>> {
        self.inner.task(id, request, cx)
    }

    fn complete<'a>(
        &'a self,
        reference: &'a CompletionRef,
        argument: &'a str,
        value: &'a str,
        context: &'a Map<String, Value>,
        cx: CallContext,
    ) -> BoxFuture<'a, PluginResult<Vec<String>>> {
        Box::pin(async move {
            match reference {
                CompletionRef::Prompt(name) => {
                    let local = CompletionRef::Prompt(self.local(name)?.to_owned());
                    self.inner.complete(&local, argument, value, context, cx).await
                }
                CompletionRef::Resource(_) => self.inner.complete(reference, argument, value, context, cx).await,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::Echo;

    #[tokio::test]
    async fn names_carry_the_namespace_both_ways() {
        let plugin = Namespaced::new("plg_1", "text", Arc::new(Echo));
        assert_eq!(plugin.tools()[0]["name"], "text_echo");
        let cx = CallContext::detached(std::time::Instant::now() + std::time::Duration::from_secs(5));
        let mut arguments = Map::new();
        arguments.insert("text".into(), "hi".into());
        let outcome = plugin.call_tool("text_echo", arguments.clone(), cx.clone()).await.unwrap();
        assert!(matches!(outcome, Outcome::Complete(_)));
        assert!(plugin.call_tool("echo", arguments, cx).await.is_err());
    }
}
