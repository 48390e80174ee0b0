//! [`Follower`]: the upstream's own `subscriptions/listen` stream, followed
//! for as long as its plugin lives.
//!
//! Its `list_changed` notifications nudge a refresh of the upstream's lists.
//! Its `resources/updated`, for the resources it lists (and what lies below
//! its templates' fixed starts, which is what we subscribe to), reach this
//! replica's listen streams subscribed to them and drop what the answer
//! cache kept of the upstream. Every replica follows the upstream itself, so
//! an update goes to this replica's streams only, never through the bus.

use std::ops::ControlFlow;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use switchyard_answers::PluginCache;
use switchyard_core::catalog::ListChanges;
use switchyard_core::listen::covers;
use switchyard_protocol::method::notification;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::client::McpClient;
use crate::limits::{Backoff, Bound};
use crate::plugin::Lists;

/// More events than this (notifications, comments, anything) within one
/// `refresh_interval` is a flood: the listen stream is dropped and reopened
/// after a backoff, so an upstream cannot make us read its stream as fast as
/// it can write it.
const FLOOD_EVENTS: usize = 1000;
/// Most resources we ask one upstream to tell us of: what one listen stream
/// may hold by default (`listen.max_resource_subscriptions`), so another
/// Switchyard accepts it.
const MAX_SUBSCRIPTIONS: usize = 256;
/// Longest URI we subscribe to, or accept an update of.
const MAX_URI_BYTES: usize = 2048;

/// What follows one upstream's listen stream.
pub(crate) struct Follower {
    /// The plugin's id: the catalog relays updates only of what it serves.
    pub(crate) plugin: String,
    pub(crate) client: Arc<McpClient>,
    pub(crate) stop: CancellationToken,
    /// Notified to refresh the lists.
    pub(crate) nudge: Arc<Notify>,
    /// Notified once the first refresh has ended, which learns the
    /// upstream's era and its resources.
    pub(crate) first_done: Arc<Notify>,
    /// Notified when the upstream's resources changed: the stream is opened
    /// again, at once, for the new ones.
    pub(crate) resubscribe: Arc<Notify>,
    pub(crate) lists: Arc<RwLock<Arc<Lists>>>,
    pub(crate) cache: PluginCache,
    pub(crate) changes: ListChanges,
}

impl Follower {
    /// Follows the stream (stateless upstreams only) until the plugin stops;
    /// reopens it after a backoff when it ends, breaks, floods or stays
    /// silent too long, and then nudges a refresh and tells every local
    /// stream subscribed to one of the upstream's resources (any URI the
    /// catalog has it serve, below a template too) that it may have changed,
    /// since changes may have been missed.
    pub(crate) async fn run(self) {
        tokio::select! {
            () = self.stop.cancelled() => return,
            () = self.first_done.notified() => {}
        }
        let limits = *self.client.limits();
        let mut backoff = Backoff::new(limits.max_backoff);
        // Whether the stream was open before and broke: what happened meanwhile is not known.
        let mut gap = false;
        loop {
            if !self.client.is_stateless().await {
                // Not (yet) known to be stateless: no stream to open; look again
                // soon, so a stream opens soon after an upstream that was down returns.
                tokio::select! {
                    () = self.stop.cancelled() => return,
                    () = tokio::time::sleep(limits.refresh_interval) => {}
                }
                continue;
            }
            let subscriptions = resource_subscriptions(&self.lists.read().unwrap_or_else(|p| p.into_inner()));
            if gap {
                self.cache.forget();
                self.changes.resources_may_have_changed(&self.plugin);
            }
            let opened = Instant::now();
            let (mut window_start, mut in_window, mut flooded) = (Instant::now(), 0_usize, false);
            // Whether the stream opened at all: one that never did missed nothing new.
            let mut heard = false;
            let listening = self.client.listen(&subscriptions, |message| {
                heard = true;
                if window_start.elapsed() > limits.refresh_interval {
                    (window_start, in_window) = (Instant::now(), 0);
                }
                in_window += 1;
                if in_window > FLOOD_EVENTS {
                    flooded = true;
                    return ControlFlow::Break(());
                }
                if let Some(message) = message {
                    self.heard(message, &subscriptions);
                }
                ControlFlow::Continue(())
            });
            let outcome = tokio::select! {
                () = self.stop.cancelled() => return,
                // Closed on purpose, and opened again at once: no gap worth reporting.
                () = self.resubscribe.notified() => {
                    gap = false;
                    continue;
                }
                outcome = listening => outcome,
            };
            gap = heard;
            if flooded {
                Bound::Flood.record(self.client.upstream());
                tracing::warn!(upstream = %self.client.spec().url, "the upstream floods its listen stream; reopening it after a backoff");
            } else {
                if let Err(error) = outcome {
                    tracing::debug!(%error, "upstream listen stream ended");
                }
                // A stream that stayed up a while was healthy, however it
                // ended (an idle cut, a reset): reconnect soon.
                if opened.elapsed() > Duration::from_secs(30) {
                    backoff.succeeded();
                }
            }
            self.nudge.notify_one();
            tokio::select! {
                () = self.stop.cancelled() => return,
                () = tokio::time::sleep(backoff.failed()) => {}
            }
        }
    }

    /// A notification on the stream: a list changed, or a resource we
    /// subscribed to (anything else it claims is dropped).
    fn heard(&self, message: &Value, subscriptions: &[String]) {
        match message.get("method").and_then(Value::as_str) {
            Some(method) if method.ends_with("/list_changed") => {
                // What the upstream answered before may have changed with its lists.
                self.cache.forget();
                self.nudge.notify_one();
            }
            Some(notification::RESOURCES_UPDATED) => {
                let uri = message["params"]["uri"].as_str().filter(|uri| uri.len() <= MAX_URI_BYTES);
                if let Some(uri) = uri.filter(|uri| subscriptions.iter().any(|s| covers(s, uri))) {
                    self.cache.forget();
                    self.changes.resource_updated(&self.plugin, uri);
                }
            }
            _ => {}
        }
    }
}

/// What to ask the upstream to tell us of: each resource it lists, and the
/// fixed start of each template up to its last `/` (updates below a
/// subscribed URI are its updates too), at most [`MAX_SUBSCRIPTIONS`].
pub(crate) fn resource_subscriptions(lists: &Lists) -> Vec<String> {
    let resources = lists.resources.iter().filter_map(|r| r["uri"].as_str());
    let templates = lists.templates.iter().filter_map(|t| t["uriTemplate"].as_str()).filter_map(|template| {
        match template.find('{') {
            None => Some(template),
            Some(variable) => template[..variable].rfind('/').map(|slash| &template[..=slash]),
        }
    });
    let mut uris: Vec<String> = resources
        .chain(templates)
        .filter(|uri| !uri.is_empty() && uri.len() <= MAX_URI_BYTES)
        .map(str::to_owned)
        .collect();
    uris.sort_unstable();
    uris.dedup();
    uris.truncate(MAX_SUBSCRIPTIONS);
    uris
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn resources_and_the_fixed_starts_of_templates_are_subscribed() {
        let mut lists = Lists::default();
        lists.resources = vec![json!({"uri": "test://static-text"}), json!({"uri": "test://static-text"}), json!({})];
        lists.templates = vec![
            json!({"uriTemplate": "test://template/{id}/data"}),
            json!({"uriTemplate": "file:///logs/{day}.txt"}),
            json!({"uriTemplate": "{+anything}"}),
            json!({"uriTemplate": "test://fixed"}),
        ];
        assert_eq!(
            resource_subscriptions(&lists),
            ["file:///logs/", "test://fixed", "test://static-text", "test://template/"]
        );
        let mut many = Lists::default();
        many.resources = (0..1000).map(|i| json!({"uri": format!("test://r/{i}")})).collect();
        assert_eq!(resource_subscriptions(&many).len(), MAX_SUBSCRIPTIONS);
    }
}
