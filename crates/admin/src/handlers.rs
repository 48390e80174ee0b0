//! The admin API's handlers.

use axum::Extension;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State as Extract};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};
use switchyard_bus::{Event, Published};
use switchyard_protocol::headers::names_media_type;
use switchyard_registry::{NewPlugin, PluginKind, PluginRecord, parse_namespace, validate_scopes};

use crate::State;
use crate::access::Actor;
use crate::problem::Problem;

type Answer = Result<Response, Problem>;

/// Parses a JSON body, refusing anything that is not `application/json`:
/// a browser cannot send that cross-site without a preflight we never grant.
fn json_body<T: serde::de::DeserializeOwned>(headers: &HeaderMap, body: &[u8]) -> Result<T, Problem> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if !names_media_type(content_type, "application/json") {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send application/json",
        ));
    }
    serde_json::from_slice(body).map_err(|e| Problem::bad_request(format!("the body is not the expected JSON: {e}")))
}

/// Brings the local catalog up to date and tells the other replicas.
async fn announce(state: &State) {
    match state.plugins.refresh().await {
        Ok(registry_version) => {
            if let Err(error) = state.bus.publish(Event::RegistryChanged { registry_version }).await {
                tracing::warn!(%error, "could not announce a registry change; other replicas catch up on their timer");
            }
        }
        Err(error) => tracing::warn!(%error, "the change is stored but this replica could not reload yet"),
    }
}

/// Builds the plugin a record would describe and checks its tools do not
/// collide with tools another plugin serves.
async fn check(state: &State, record: &PluginRecord) -> Result<(), Problem> {
    let tools = state.plugins.check(record).await?;
    let snapshot = state.catalog.snapshot();
    for tool in &tools {
        let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
        if let Some(existing) = snapshot.tool(name).filter(|t| t.plugin.id() != record.id) {
            return Err(Problem::invalid(
                "namespace",
                format!("tool {name} is already served by plugin {}; choose another namespace", existing.plugin.id()),
            ));
        }
    }
    Ok(())
}

pub(crate) async fn list(Extract(state): Extract<State>) -> Answer {
    let plugins = state.registry.list().await?;
    Ok(Json(json!({ "plugins": plugins })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Create {
    namespace: String,
    kind: String,
    #[serde(default = "empty_object")]
    spec: Value,
    #[serde(default = "yes")]
    enabled: bool,
    #[serde(default)]
    scopes: Vec<String>,
}

fn empty_object() -> Value {
    json!({})
}

fn yes() -> bool {
    true
}

pub(crate) async fn create(
    Extract(state): Extract<State>,
    Extension(actor): Extension<Actor>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let request: Create = json_body(&headers, &body)?;
    parse_namespace(&request.namespace)?;
    let kind = PluginKind::parse(&request.kind).ok_or_else(|| {
        Problem::invalid("kind", format!("{:?} is not a plugin kind (builtin, wasm, upstream)", request.kind))
    })?;
    validate_scopes(&request.scopes)?;
    let new = NewPlugin {
        namespace: request.namespace,
        kind,
        spec: request.spec,
        enabled: request.enabled,
        scopes: request.scopes,
    };
    // Checked as the record it would become; the id is only a label here.
    let candidate = PluginRecord {
        id: "(new)".into(),
        namespace: new.namespace.clone(),
        kind,
        spec: new.spec.clone(),
        enabled: new.enabled,
        version: 0,
        created_at_ms: 0,
        updated_at_ms: 0,
        updated_by: actor.0.clone(),
        scopes: new.scopes.clone(),
    };
    check(&state, &candidate).await?;
    let record = state.registry.create(new, &actor.0).await?;
    tracing::info!(plugin = %record.id, namespace = %record.namespace, kind = kind.as_str(), actor = %actor.0, "plugin registered");
    announce(&state).await;
    Ok((StatusCode::CREATED, Json(record)).into_response())
}

pub(crate) async fn show(Extract(state): Extract<State>, Path(id): Path<String>) -> Answer {
    Ok(Json(state.registry.get(&id).await?).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Update {
    spec: Value,
    version: i64,
}

pub(crate) async fn update(
    Extract(state): Extract<State>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let request: Update = json_body(&headers, &body)?;
    let mut candidate = state.registry.get(&id).await?;
    candidate.spec = request.spec.clone();
    check(&state, &candidate).await?;
    let written = state.registry.update_spec(&id, request.version, request.spec, &actor.0).await;
    versioned_write(&state, &actor, "spec changed", written).await
}

/// The end of every change to a plugin that names the version it read:
/// the registry's answer (409 with `current_version` when another change
/// came first), logged with who made it, announced to every replica, and
/// the record as it is now.
async fn versioned_write(
    state: &State,
    actor: &Actor,
    what: &'static str,
    written: switchyard_registry::Result<PluginRecord>,
) -> Answer {
    let record = written?;
    tracing::info!(plugin = %record.id, version = record.version, actor = %actor.0, "plugin {what}");
    announce(state).await;
    Ok(Json(record).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Scopes {
    scopes: Vec<String>,
    version: i64,
}

/// `PUT /plugins/{id}/scopes`: what a caller's token needs for the plugin.
pub(crate) async fn set_scopes(
    Extract(state): Extract<State>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let request: Scopes = json_body(&headers, &body)?;
    let written = state.registry.set_scopes(&id, request.version, &request.scopes, &actor.0).await;
    versioned_write(&state, &actor, "scopes changed", written).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Version {
    version: i64,
}

/// `POST /plugins/{id}/enable` and `/disable`.
pub(crate) async fn switch(
    Extract(state): Extract<State>,
    Extension(actor): Extension<Actor>,
    Path((id, action)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let enabled = match action.as_str() {
        "enable" => true,
        "disable" => false,
        _ => return Ok(not_found().await),
    };
    let request: Version = json_body(&headers, &body)?;
    if enabled {
        // A plugin enabled later must still build, and its names still be free.
        check(&state, &state.registry.get(&id).await?).await?;
    }
    let written = state.registry.set_enabled(&id, request.version, enabled, &actor.0).await;
    versioned_write(&state, &actor, if enabled { "enabled" } else { "disabled" }, written).await
}

#[derive(Deserialize)]
pub(crate) struct RemoveQuery {
    version: Option<i64>,
}

pub(crate) async fn remove(
    Extract(state): Extract<State>,
    Extension(actor): Extension<Actor>,
    Path(id): Path<String>,
    Query(query): Query<RemoveQuery>,
) -> Answer {
    let version = query.version.ok_or_else(|| Problem::invalid("version", "is required: DELETE …?version=N"))?;
    state.registry.delete(&id, version).await?;
    tracing::info!(plugin = %id, actor = %actor.0, "plugin removed");
    announce(&state).await;
    Ok(StatusCode::NO_CONTENT.into_response())
}

pub(crate) async fn tools(Extract(state): Extract<State>, Path(id): Path<String>) -> Answer {
    let record = state.registry.get(&id).await?;
    let snapshot = state.catalog.snapshot();
    let tools: Vec<&Value> =
        snapshot.tools.iter().filter(|t| t.plugin.id() == record.id).map(|t| &t.definition).collect();
    Ok(Json(json!({ "plugin": record.id, "enabled": record.enabled, "tools": tools })).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResourceUpdated {
    uri: String,
}

/// `POST /notifications/resources/updated` with `{"uri": …}`: tells every
/// replica's listen streams subscribed to `uri` (or a URI above it) that the
/// resource changed, so clients re-read it. For plugins whose data changes
/// outside a call (a webhook, a batch job) and for operators.
pub(crate) async fn resource_updated(
    Extract(state): Extract<State>,
    Extension(actor): Extension<Actor>,
    headers: HeaderMap,
    body: Bytes,
) -> Answer {
    let request: ResourceUpdated = json_body(&headers, &body)?;
    // An absolute URI: a scheme, then anything without whitespace or controls.
    let scheme_end = request.uri.find(':').unwrap_or(0);
    let valid = scheme_end > 0
        && request.uri[..scheme_end].bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
        && request.uri.len() <= 2048
        && !request.uri.chars().any(|c| c.is_whitespace() || c.is_control());
    if !valid {
        return Err(Problem::invalid("uri", "must be an absolute URI (scheme:…) of at most 2048 characters"));
    }
    let event = Event::ResourceUpdated { uri: request.uri.clone() };
    let published = match idempotency_key(&headers)? {
        // Keys are the caller's own: two callers cannot collide.
        Some(key) => state.bus.publish_once(event, &format!("{}:{key}", actor.0)).await,
        None => state.bus.publish(event).await.map(|()| Published::Now),
    };
    match published {
        Ok(Published::Now) => tracing::info!(actor = %actor.0, "resources/updated published"),
        Ok(Published::Already) => tracing::info!(actor = %actor.0, "resources/updated already published under its key"),
        Err(switchyard_bus::Error::KeyReused) => {
            let minutes = switchyard_bus::IDEMPOTENCY_WINDOW.as_secs() / 60;
            return Err(Problem::invalid(
                "Idempotency-Key",
                format!("was used for another event in the last {minutes} minutes"),
            ));
        }
        Err(error @ switchyard_bus::Error::Unanswered(_)) => {
            tracing::warn!(%error, "resources/updated may or may not have been published");
            return Err(Problem::new(
                StatusCode::GATEWAY_TIMEOUT,
                "bus_unanswered",
                "perhaps published: Redis did not answer the append, so listen streams may hear it or not; \
                 retry with the same Idempotency-Key so that it is heard exactly once",
            ));
        }
        Err(error) => {
            tracing::warn!(%error, "could not publish resources/updated");
            return Err(Problem::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "bus_unavailable",
                "not published: no listen stream heard it (the bus cannot reach Redis); \
                 retry later, with an Idempotency-Key so that it is heard once",
            ));
        }
    }
    Ok(StatusCode::ACCEPTED.into_response())
}

/// The `Idempotency-Key` header, if any: 1 to 128 visible ASCII characters.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<&str>, Problem> {
    let Some(value) = headers.get("idempotency-key") else { return Ok(None) };
    match value.to_str() {
        Ok(key) if (1..=128).contains(&key.len()) && key.bytes().all(|b| b.is_ascii_graphic()) => Ok(Some(key)),
        _ => Err(Problem::bad_request("Idempotency-Key: must be 1 to 128 visible ASCII characters")),
    }
}

pub(crate) async fn upload(Extract(state): Extract<State>, headers: HeaderMap, body: Bytes) -> Answer {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
    if !["application/wasm", "application/octet-stream"].iter().any(|media| names_media_type(content_type, media)) {
        return Err(Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the module as application/wasm",
        ));
    }
    if body.len() > state.max_artifact_bytes {
        return Err(Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!("artifacts may be at most {} bytes", state.max_artifact_bytes),
        ));
    }
    if body.is_empty() {
        return Err(Problem::bad_request("the artifact is empty"));
    }
    let sha256 = state.registry.put_artifact(&body).await?;
    tracing::info!(%sha256, size = body.len(), "artifact stored");
    Ok((StatusCode::CREATED, Json(json!({ "sha256": sha256, "size": body.len() }))).into_response())
}

pub(crate) async fn not_found() -> Response {
    Problem::new(StatusCode::NOT_FOUND, "not_found", "no such admin endpoint").into_response()
}
