//! The hub's tests: filters, fan-out, bounds, the read gate, slow streams and gaps.

use super::*;
use switchyard_bus::InMemoryBus;

fn limits(queue: usize) -> ListenLimits {
    ListenLimits { queue, ..ListenLimits::default() }
}

fn method(frame: &ListenFrame) -> &str {
    match frame {
        ListenFrame::Notification(n) => n.method(),
        ListenFrame::Final(_) => "<final>",
    }
}

#[tokio::test]
async fn acknowledges_first_and_honours_the_filter_strictly() {
    let bus: Arc<dyn NotificationBus> = Arc::new(InMemoryBus::new());
    let shutdown = CancellationToken::new();
    let hub = ListenHub::spawn(&bus, shutdown.clone(), limits(8));
    let mut prompts_only =
        hub.open(json!(7), Filter { prompts: true, ..Filter::default() }, &Caller::anonymous()).unwrap();
    let first = prompts_only.next().await.unwrap();
    assert_eq!(method(&first), names::SUBSCRIPTIONS_ACKNOWLEDGED);
    let ListenFrame::Notification(ack) = first else { unreachable!() };
    let ack = ack.to_value();
    assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], json!(7));
    assert_eq!(ack["params"]["notifications"], json!({"promptsListChanged": true}));

    bus.publish(Event::ToolsListChanged { catalog_version: 1 }).await.unwrap();
    bus.publish(Event::PromptsListChanged { catalog_version: 2 }).await.unwrap();
    let next = prompts_only.next().await.unwrap();
    assert_eq!(method(&next), names::PROMPTS_LIST_CHANGED, "the tools change must not leak");

    shutdown.cancel();
    let last = prompts_only.next().await.unwrap();
    assert_eq!(last, ListenFrame::Final(json!({"resultType": "complete", "_meta": {SUBSCRIPTION_ID: 7}})));
    assert_eq!(prompts_only.next().await, None);
}

#[test]
fn a_notification_is_the_message_with_the_subscription_id_stamped_in() {
    let cases = [
        (json!({}), json!(7)),
        (json!({"uri": "file:///a \"b\"", "_meta": {"replaced": true}}), json!("s-1")),
        (json!({"taskId": "t", "status": "working", "ttlMs": 5}), json!(3.5)),
    ];
    for (params, id) in cases {
        let message = ListenNotification {
            method: names::RESOURCES_UPDATED,
            head: ListenNotification::head(names::RESOURCES_UPDATED, params.clone()),
            subscription_id: id.to_string().into_bytes().into(),
        };
        let mut expected = params;
        expected[META] = json!({ SUBSCRIPTION_ID: id });
        let expected = json!({"jsonrpc": "2.0", "method": names::RESOURCES_UPDATED, "params": expected});
        assert_eq!(message.to_value(), expected, "{message:?}");
    }
}

#[tokio::test]
async fn resource_subscriptions_cover_sub_resources_only() {
    assert!(covers("file:///srv", "file:///srv/a.txt"));
    assert!(covers("file:///srv/", "file:///srv/a.txt"));
    assert!(covers("test://x", "test://x"));
    assert!(!covers("file:///srv", "file:///srv2"));
}

fn caller(principal: &str, scopes: &[&str]) -> Caller {
    Caller {
        principal: Some(principal.into()),
        scopes: Some(Arc::new(scopes.iter().map(|s| (*s).to_owned()).collect())),
        ..Caller::default()
    }
}

fn resources(uris: &[&str]) -> Filter {
    Filter { resource_uris: uris.iter().map(|u| (*u).to_owned()).collect(), ..Filter::default() }
}

/// Reads of `secret://` need `secret`; everything else is open; `gone://` is served by nothing.
struct Reads;
impl ReadScopes for Reads {
    fn needed(&self, uri: &str) -> Option<Vec<String>> {
        if uri.starts_with("gone://") {
            None
        } else if uri.starts_with("secret://") {
            Some(vec!["secret".into()])
        } else {
            Some(Vec::new())
        }
    }
}

async fn next_uri(stream: &mut ListenStream) -> String {
    match tokio::time::timeout(std::time::Duration::from_secs(5), stream.next()).await.unwrap().unwrap() {
        ListenFrame::Notification(n) => n.to_value()["params"]["uri"].as_str().unwrap_or("").to_owned(),
        ListenFrame::Final(_) => "<final>".into(),
    }
}

#[tokio::test]
async fn streams_are_bounded_per_caller_and_per_process() {
    let bus: Arc<dyn NotificationBus> = Arc::new(InMemoryBus::new());
    let limits = ListenLimits { max_streams: 3, max_streams_per_caller: 2, ..ListenLimits::default() };
    let hub = ListenHub::spawn(&bus, CancellationToken::new(), limits);
    let (alice, bob, carol) = (caller("alice", &[]), caller("bob", &[]), caller("carol", &[]));
    let first = hub.open(json!(1), Filter::default(), &alice).unwrap();
    let _second = hub.open(json!(2), Filter::default(), &alice).unwrap();
    assert_eq!(hub.open(json!(3), Filter::default(), &alice).err(), Some(Refusal::Caller(2)));
    let _third = hub.open(json!(4), Filter::default(), &bob).unwrap();
    assert_eq!(hub.open(json!(5), Filter::default(), &carol).err(), Some(Refusal::Process(3)));
    // A closed stream gives its place back, to its caller and to the process.
    drop(first);
    assert_eq!(hub.inner.lock().held_by("p:alice"), 1);
    let _fourth = hub.open(json!(6), Filter::default(), &carol).unwrap();
    assert_eq!(hub.open_streams(), 3);
}

#[test]
fn subscription_lists_are_bounded_in_count_and_bytes() {
    let limits = ListenLimits { max_resource_subscriptions: 2, max_subscription_bytes: 10, ..ListenLimits::default() };
    assert!(limits.check_subscriptions(&["a://1".into(), "a://2".into()]).is_ok());
    let three = limits.check_subscriptions(&["a".into(), "b".into(), "c".into()]).unwrap_err();
    assert!(three.contains("at most 2"), "{three}");
    let long = limits.check_subscriptions(&["a://0123456789".into()]).unwrap_err();
    assert!(long.contains("14 bytes"), "{long}");
}

#[tokio::test]
async fn an_update_reaches_the_streams_subscribed_at_or_above_it_that_may_read_it() {
    let bus: Arc<dyn NotificationBus> = Arc::new(InMemoryBus::new());
    let hub = ListenHub::spawn(&bus, CancellationToken::new(), limits(8));
    hub.gate_reads(Arc::new(Reads));
    let anyone = Caller::anonymous();
    let mut above = hub.open(json!(1), resources(&["file:///srv", "file:///srv/"]), &anyone).unwrap();
    let mut sibling = hub.open(json!(2), resources(&["file:///srv2", "secret://x", "gone://"]), &anyone).unwrap();
    let mut cleared = hub.open(json!(3), resources(&["secret://"]), &caller("c", &["secret"])).unwrap();
    let mut uncleared =
        hub.open(json!(4), resources(&["secret://", "gone://", "file:///"]), &caller("u", &[])).unwrap();
    for stream in [&mut above, &mut sibling, &mut cleared, &mut uncleared] {
        stream.next().await.unwrap(); // the ack
    }
    for uri in ["file:///srv/a.txt", "secret://x", "gone://y", "file:///last"] {
        bus.publish(Event::ResourceUpdated { uri: uri.into() }).await.unwrap();
    }
    // Once per stream although two of its subscriptions cover it.
    assert_eq!(next_uri(&mut above).await, "file:///srv/a.txt");
    assert_eq!(next_uri(&mut sibling).await, "secret://x", "without scopes, authorization is off");
    assert_eq!(next_uri(&mut sibling).await, "gone://y");
    assert_eq!(next_uri(&mut cleared).await, "secret://x");
    // Neither the secret nor what no one serves reaches a scoped caller who may not read it.
    assert_eq!(next_uri(&mut uncleared).await, "file:///srv/a.txt");
    assert_eq!(next_uri(&mut uncleared).await, "file:///last");
}

#[tokio::test]
async fn a_slow_stream_is_closed_and_counted() {
    let bus: Arc<dyn NotificationBus> = Arc::new(InMemoryBus::new());
    let hub = ListenHub::spawn(&bus, CancellationToken::new(), limits(2));
    let mut slow = hub.open(json!("s"), Filter { tools: true, ..Filter::default() }, &Caller::anonymous()).unwrap();
    assert!(slow.next().await.is_some()); // the ack
    for v in 0..5 {
        bus.publish(Event::ToolsListChanged { catalog_version: v }).await.unwrap();
    }
    // Two queued frames, then the end: the stream was closed, not grown.
    let mut frames = 0;
    while slow.next().await.is_some() {
        frames += 1;
    }
    assert_eq!(frames, 2);
    assert_eq!(hub.dropped_slow_streams(), 1);
    assert_eq!(hub.open_streams(), 0);
}

#[tokio::test]
async fn after_a_gap_lists_change_and_streams_waiting_for_resources_or_tasks_end() {
    let bus: Arc<dyn NotificationBus> = Arc::new(InMemoryBus::new());
    let hub = ListenHub::spawn(&bus, CancellationToken::new(), limits(8));
    let anyone = Caller::anonymous();
    let mut lists = hub.open(json!("l"), Filter { tools: true, ..Filter::default() }, &anyone).unwrap();
    let mut files = hub.open(json!("r"), Filter { tools: true, ..resources(&["file:///"]) }, &anyone).unwrap();
    let task_filter = Filter { task_ids: vec!["t1".into()], ..Filter::default() };
    let mut task = hub.open(json!("t"), task_filter, &anyone).unwrap();
    for stream in [&mut lists, &mut files, &mut task] {
        stream.next().await.unwrap(); // the ack
    }
    // More than the bus's local channel holds before the hub reads: it lags.
    for version in 0..1100 {
        bus.publish(Event::RegistryChanged { registry_version: version }).await.unwrap();
    }
    assert_eq!(method(&lists.next().await.unwrap()), names::TOOLS_LIST_CHANGED);
    assert_eq!(method(&files.next().await.unwrap()), names::TOOLS_LIST_CHANGED);
    for stream in [&mut files, &mut task] {
        let ListenFrame::Final(result) = stream.next().await.unwrap() else { panic!("a final result") };
        assert_eq!(result["resultType"], "complete");
        assert!(stream.next().await.is_none());
    }
    assert_eq!(hub.open_streams(), 1, "the list-only stream stays");
    assert_eq!(hub.dropped_slow_streams(), 0, "ended, not dropped");
}
