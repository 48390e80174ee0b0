//! Multi-round requests through an upstream: its `input_required` answer as
//! our own (its input requests checked and rebuilt, its `requestState`
//! carried inside the state our server seals), and a retry's answers and
//! that state sent back to it.
//!
//! Our client sees only the upstream's input requests: the upstream's state
//! travels sealed inside ours, so the client can neither read nor change it,
//! and the retry may land on any replica. The keys of the input requests
//! are the upstream's, so the client's answers go back under them unchanged.

use serde_json::{Map, Value, json};
use switchyard_core::{CallContext, Outcome, PluginError, plugin::PluginResult};
use switchyard_protocol::meta::{META, SERVER_INFO};
use switchyard_protocol::method::input;

/// Most input requests one upstream answer may carry.
const MAX_INPUT_REQUESTS: usize = 16;
/// Longest key of an input request.
const MAX_KEY_BYTES: usize = 256;
/// Where, in the state we carry, the upstream's own `requestState` is.
const UPSTREAM_STATE: &str = "upstream";
/// Where, in the state we carry, the id of a 2025-era upstream's call that
/// waits for our client's answers is.
const PARKED: &str = "parked";

/// An upstream result as ours: a final one without what our server adds
/// itself (`resultType`, `ttlMs`, `cacheScope`), the upstream's request
/// for our client's input, or the task the call became there.
pub(crate) fn outcome(mut result: Value) -> PluginResult<Outcome> {
    match result.get("resultType").and_then(Value::as_str) {
        None | Some("complete") => {}
        Some("input_required") => return input_required(&mut result),
        // The call became a task the upstream keeps; our server checks it.
        Some("task") => {
            let Value::Object(fields) = result else { unreachable!("it has a resultType") };
            return Ok(Outcome::Task(fields));
        }
        Some(other) => return Err(PluginError::Tool(format!("the upstream answered with resultType {other:?}"))),
    }
    if let Some(object) = result.as_object_mut() {
        object.remove("resultType");
        object.remove("ttlMs");
        object.remove("cacheScope");
        without_server_info(object);
    }
    Ok(Outcome::Complete(result))
}

/// `result` without the upstream's description of itself, which no client
/// of ours is given (a 2026-era client reads ours there; a 2025-era one,
/// whose results carry none of ours, none), and without the `_meta` it
/// leaves empty. A result that then has neither `resultType` nor `_meta` is written
/// with our server's members appended as text made once
/// (`protocol::finished`), rather than through a `_meta` map that our
/// description is cloned into: on an upstream's `echo`, whose `_meta` holds
/// only its `serverInfo`, that was 2,800 of the 97,400 instructions a call
/// cost the front (#18, `loadtest/callgrind-tools-call.sh` with
/// `UPSTREAM=http1`). The answer's parse leaves `serverInfo` out already,
/// and an `_meta` left empty (`counted`, which also leaves out the
/// `"complete"` `resultType` that `outcome` removes); a parked call's turn
/// from a replica of an earlier version, during a rollout, may still carry
/// them.
fn without_server_info(result: &mut Map<String, Value>) {
    let Some(Value::Object(meta)) = result.get_mut(META) else { return };
    meta.remove(SERVER_INFO);
    if meta.is_empty() {
        result.remove(META);
    }
}

/// The upstream's `inputRequests`, each rebuilt from its method and params
/// (nothing else it put there reaches our client), and its `requestState`.
fn input_required(result: &mut Value) -> PluginResult<Outcome> {
    let malformed = |why: String| PluginError::Tool(format!("the upstream asked for input malformed: {why}"));
    let Some(Value::Object(asked)) = result.get_mut("inputRequests").map(Value::take) else {
        return Err(malformed("no inputRequests object".into()));
    };
    if asked.is_empty() || asked.len() > MAX_INPUT_REQUESTS {
        return Err(malformed(format!("{} input requests (1 to {MAX_INPUT_REQUESTS} may be asked)", asked.len())));
    }
    let requests = rebuilt(asked)?;
    let state = match result.get_mut("requestState").map(Value::take) {
        None | Some(Value::Null) => None,
        Some(Value::String(state)) => Some(json!({ UPSTREAM_STATE: state })),
        Some(_) => return Err(malformed("a requestState that is not a string".into())),
    };
    Ok(Outcome::InputRequired { requests, state })
}

/// The upstream's input requests (by key), each rebuilt ([`input_request`]).
pub(crate) fn rebuilt(asked: Map<String, Value>) -> PluginResult<Map<String, Value>> {
    asked.into_iter().map(|(key, request)| input_request(&key, request).map(|request| (key, request))).collect()
}

/// An input request of the upstream's under `key`, rebuilt from its method
/// and params: nothing else it put there reaches our client.
fn input_request(key: &str, mut request: Value) -> PluginResult<Value> {
    let malformed = |why: &str| PluginError::Tool(format!("the upstream asked for input malformed: {key:.64}: {why}"));
    let method = match request.get("method").and_then(Value::as_str) {
        Some(input::ELICIT) => input::ELICIT,
        Some(input::CREATE_MESSAGE) => input::CREATE_MESSAGE,
        Some(input::LIST_ROOTS) => input::LIST_ROOTS,
        _ => return Err(malformed("not an elicitation, sampling or roots request")),
    };
    let params = request.get_mut("params").map_or(json!({}), Value::take);
    if key.len() > MAX_KEY_BYTES || !params.is_object() {
        return Err(malformed("a key too long, or params not an object"));
    }
    Ok(json!({ "method": method, "params": params }))
}

/// A 2025-era upstream's request to our client, asked mid-call (`request`,
/// under `key`), as our `input_required`: its call waits, parked under
/// `parked`, which our state carries.
pub(crate) fn asked_mid_call(parked: String, key: String, request: Value) -> PluginResult<Outcome> {
    let request = input_request(&key, request)?;
    let requests = Map::from_iter([(key, request)]);
    Ok(Outcome::InputRequired { requests, state: Some(json!({ PARKED: parked })) })
}

/// On a retry, the id of the 2025-era upstream's call that waits for our
/// client's answers, if this retry is for one.
pub(crate) fn parked(cx: &CallContext) -> Option<&str> {
    cx.input()?.state.as_ref()?.get(PARKED)?.as_str()
}

/// On a retry, our client's answers and the upstream's own state, as the
/// upstream's retry carries them.
pub(crate) fn answer(params: &mut Map<String, Value>, cx: &CallContext) {
    let Some(round) = cx.input() else { return };
    params.insert("inputResponses".into(), Value::Object(round.responses.clone()));
    if let Some(state) = round.state.as_ref().and_then(|state| state.get(UPSTREAM_STATE)) {
        params.insert("requestState".into(), state.clone());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_final_answer_loses_what_our_server_adds() {
        let result = json!({"content": [], "resultType": "complete", "ttlMs": 5, "cacheScope": "public"});
        assert_eq!(outcome(result).unwrap(), Outcome::Complete(json!({"content": []})));
    }

    #[test]
    fn the_upstream_s_server_info_goes_and_the_rest_of_its_meta_stays() {
        let server_info = json!({"name": "theirs", "version": "1"});
        let alone = json!({"content": [], "resultType": "complete", "_meta": {SERVER_INFO: server_info}});
        assert_eq!(outcome(alone).unwrap(), Outcome::Complete(json!({"content": []})));
        let beside = json!({"content": [], "_meta": {SERVER_INFO: server_info, "example.com/trace": "t"}});
        assert_eq!(
            outcome(beside).unwrap(),
            Outcome::Complete(json!({"content": [], "_meta": {"example.com/trace": "t"}}))
        );
        // A `_meta` that is not an object is the upstream's affair, left as it is.
        let odd = json!({"content": [], "_meta": 7});
        assert_eq!(outcome(odd).unwrap(), Outcome::Complete(json!({"content": [], "_meta": 7})));
    }

    #[test]
    fn input_requests_are_rebuilt_and_the_state_wrapped() {
        let result = json!({"resultType": "input_required", "requestState": "theirs",
            "inputRequests": {"name": {"method": "elicitation/create", "params": {"message": "?"}, "extra": 1},
                              "roots": {"method": "roots/list"}}});
        let Outcome::InputRequired { requests, state } = outcome(result).unwrap() else { panic!("input required") };
        assert_eq!(
            Value::Object(requests),
            json!({
            "name": {"method": "elicitation/create", "params": {"message": "?"}},
            "roots": {"method": "roots/list", "params": {}}})
        );
        assert_eq!(state, Some(json!({"upstream": "theirs"})));
    }

    #[test]
    fn malformed_input_requests_are_a_tool_error() {
        let many: Map<String, Value> =
            (0..=MAX_INPUT_REQUESTS).map(|i| (format!("k{i}"), json!({"method": "roots/list"}))).collect();
        for input_requests in [
            json!(null),
            json!({}),
            Value::Object(many),
            json!({"k": {"method": "tools/call", "params": {}}}),
            json!({"k": {"method": "roots/list", "params": []}}),
            json!({"k".repeat(MAX_KEY_BYTES + 1): {"method": "roots/list"}}),
        ] {
            let result = json!({"resultType": "input_required", "inputRequests": input_requests.clone()});
            assert!(matches!(outcome(result), Err(PluginError::Tool(_))), "{input_requests}");
        }
        let odd_state = json!({"resultType": "input_required", "inputRequests": {"k": {"method": "roots/list"}},
            "requestState": {"not": "a string"}});
        assert!(matches!(outcome(odd_state), Err(PluginError::Tool(_))));
        assert!(matches!(outcome(json!({"resultType": "later"})), Err(PluginError::Tool(_))));
        let task = json!({"resultType": "task", "taskId": "t", "status": "working"});
        assert_eq!(outcome(task.clone()).unwrap(), Outcome::Task(task.as_object().unwrap().clone()));
    }
}
