//! `subscriptions/listen`: a stream opened within the hub's bounds, for the
//! caller's own live tasks only.

use serde_json::{Map, Value};
use switchyard_protocol::ErrorObject;
use switchyard_protocol::capabilities::ClientCapability;
use switchyard_protocol::params::ListenFilter;

use super::Server;
use crate::error::Error;
use crate::listen::{Filter, ListenStream, Refusal};
use crate::request::Prepared;

impl Server {
    /// Opens a listen stream for `filter`.
    pub(super) async fn listen(
        &self,
        request: &Prepared,
        filter: &ListenFilter,
        capabilities: &Map<String, Value>,
    ) -> Result<ListenStream, Error> {
        self.hub.limits().check_subscriptions(&filter.resource_uris).map_err(Error::TooManySubscriptions)?;
        if filter.task_ids.is_some() && !ClientCapability::Tasks.is_declared_in(capabilities) {
            return Err(ErrorObject::missing_capability(ClientCapability::Tasks.as_required()).into());
        }
        let requested = filter.task_ids.iter().flatten();
        // Only the caller's own, live tasks; the acknowledgement says which.
        let mut task_ids = Vec::new();
        if let Some(tasks) = &self.tasks {
            for id in requested.take(100) {
                match tasks.find(id, &request.caller, self.catalog.bus().as_ref()).await {
                    Ok(_) => task_ids.push(id.clone()),
                    Err(Error::UnknownTask(_)) => {}
                    Err(error) => return Err(error),
                }
            }
        }
        let filter = Filter {
            tools: filter.tools,
            prompts: filter.prompts,
            resources: filter.resources,
            resource_uris: filter.resource_uris.clone(),
            task_ids,
        };
        self.hub.open(request.id.to_value(), filter, &request.caller).map_err(|refusal| {
            Error::OverLimit(match refusal {
                Refusal::Caller(bound) => format!("Too many listen streams: this caller holds {bound} already"),
                Refusal::Process(bound) => format!("Too many listen streams: this server holds {bound} already"),
            })
        })
    }
}
