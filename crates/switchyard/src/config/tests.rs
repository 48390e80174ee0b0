//! The configuration as the binary reads it: every section through its
//! crate's checks, composed, every problem reported at once.

use super::*;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[test]
fn defaults_bind_to_loopback() {
    let config = Config::try_from(RawConfig::load(None, env(&[])).unwrap()).unwrap();
    assert!(config.bind.ip().is_loopback());
    assert_eq!(config.plugins, ["calculator", "echo"]);
    assert!(config.ephemeral_state_key);
}

#[test]
fn environment_overrides_and_nests() {
    let raw = RawConfig::load(
        None,
        env(&[
            ("SWITCHYARD_BIND", "127.0.0.1:9999"),
            ("SWITCHYARD_FIXTURE", "conformance"),
            ("SWITCHYARD_HTTP__MAX_BODY_BYTES", "1024"),
            ("SWITCHYARD_HTTP__ALLOWED_HOSTS", "a.example,b.example"),
            (
                "SWITCHYARD_STATE__KEYS",
                "k2:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=,k1:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=",
            ),
            ("OTHER", "ignored"),
        ]),
    )
    .unwrap();
    let config = Config::try_from(raw).unwrap();
    assert_eq!(config.bind.port(), 9999);
    assert!(config.plugins.contains(&"conformance".to_owned()));
    assert_eq!(config.http.max_body_bytes, 1024);
    assert_eq!(config.http.allowed_hosts, ["a.example", "b.example"]);
    assert_eq!(config.core.state_keys.iter().map(|k| k.id.as_str()).collect::<Vec<_>>(), ["k2", "k1"]);
}

#[test]
fn redis_cluster_takes_seed_nodes_for_the_bus_and_the_limits() {
    let nodes = "redis://10.0.0.1:6379,redis://10.0.0.2:6379";
    let key = "k1:MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    let clustered =
        [("SWITCHYARD_REDIS_URL", nodes), ("SWITCHYARD_REDIS_CLUSTER", "true"), ("SWITCHYARD_STATE__KEYS", key)];
    let config = Config::try_from(RawConfig::load(None, env(&clustered)).unwrap()).unwrap();
    let redis = config.redis.unwrap();
    assert!(redis.cluster);
    assert_eq!(redis.url, nodes);
    assert_eq!(redis.keys.iter().map(|k| k.id.as_str()).collect::<Vec<_>>(), ["k1"], "the bus signs with state.keys");
    // Without shared keys, replicas sharing Redis could not trust each other.
    let problem = Config::try_from(RawConfig::load(None, env(&clustered[..2])).unwrap()).unwrap_err();
    assert!(problem.to_string().contains("state.keys"), "{problem}");
    let limited = [clustered[0], clustered[1], clustered[2], ("SWITCHYARD_RATE_LIMIT__RATE", "10/s")];
    let config = Config::try_from(RawConfig::load(None, env(&limited)).unwrap()).unwrap();
    assert!(config.redis.unwrap().cluster && config.rate_limit.is_some());
}

#[test]
fn reports_every_problem_at_once() {
    let raw = RawConfig::load(
        None,
        env(&[
            ("SWITCHYARD_BIND", "nowhere"),
            ("SWITCHYARD_SERVER__CALL_TIMEOUT", "soon"),
            ("SWITCHYARD_PLUGINS", "nope"),
            ("SWITCHYARD_DATABASE_URL", "mysql://db/x"),
            ("SWITCHYARD_HTTP__HEADER_READ_TIMEOUT", "0s"),
        ]),
    )
    .unwrap();
    let Invalid(problems) = Config::try_from(raw).unwrap_err();
    assert_eq!(problems.len(), 5, "{problems:?}");
    assert!(problems.iter().any(|p| p.starts_with("http.header_read_timeout")), "{problems:?}");
    assert!(RawConfig::load(None, env(&[("SWITCHYARD_NO_SUCH_KEY", "1")])).is_err());
}

#[test]
fn a_secret_of_digits_is_read_as_its_text_and_never_quoted() {
    let config = Config::load(None, env(&[("SWITCHYARD_ADMIN__TOKEN", "1234567890123456789")])).unwrap();
    assert_eq!(config.admin.unwrap().token.unwrap().expose(), "1234567890123456789");
    let Invalid(problems) =
        Config::load(None, env(&[("SWITCHYARD_ADMIN__TOKEN", "[\"hunter2-hunter2-hunter2\"]")])).unwrap_err();
    assert!(problems.iter().all(|p| !p.contains("hunter2")), "{problems:?}");
}

#[test]
fn problems_reading_one_section_hide_none_of_the_others() {
    let Invalid(problems) = Config::load(
        None,
        env(&[
            ("SWITCHYARD_HTTP__NO_SUCH_KEY", "1"),
            ("SWITCHYARD_RATE_LIMIT__ON_REDIS_ERROR", "maybe"),
            ("SWITCHYARD_NO_SUCH_SECTION__KEY", "1"),
            ("SWITCHYARD_BIND", "nowhere"),
            ("SWITCHYARD_SERVER__PAGE_SIZE", "0"),
        ]),
    )
    .unwrap_err();
    let said = |what: &str| problems.iter().any(|p| p.contains(what));
    assert!(said("no_such_key") && said("no_such_section"), "unknown keys, each: {problems:?}");
    assert!(said("maybe") && said("allow") && said("deny"), "an enum names its values: {problems:?}");
    assert!(said("bind:") && said("page_size"), "and the checks still ran: {problems:?}");
    assert_eq!(problems.len(), 5, "{problems:?}");
}

#[test]
fn a_public_bind_needs_authentication_or_an_explicit_opt_out() {
    let public = [("SWITCHYARD_BIND", "0.0.0.0:8080")];
    let refused = Config::try_from(RawConfig::load(None, env(&public)).unwrap()).unwrap_err();
    assert!(refused.to_string().contains("[auth] needs issuers"), "{refused}");
    let opted_out = env(&[("SWITCHYARD_BIND", "0.0.0.0:8080"), ("SWITCHYARD_AUTH__ALLOW_UNAUTHENTICATED", "true")]);
    assert!(Config::try_from(RawConfig::load(None, opted_out).unwrap()).unwrap().auth.is_none());

    let secured = env(&[
        ("SWITCHYARD_BIND", "0.0.0.0:8080"),
        ("SWITCHYARD_AUTH__RESOURCE", "https://mcp.example.com/mcp"),
        ("SWITCHYARD_AUTH__ISSUERS", r#"[{ issuer = "https://as.example.com", algorithms = ["ES256"] }]"#),
        ("SWITCHYARD_AUTH__REQUIRED_SCOPES", "mcp,tools"),
        ("SWITCHYARD_AUTH__SCOPES__TOOLS__UNITS_CONVERT", "units"),
    ]);
    let config = Config::try_from(RawConfig::load(None, secured).unwrap()).unwrap();
    let auth = config.auth.expect("auth on");
    assert_eq!(auth.verifier.resource, "https://mcp.example.com/mcp");
    assert_eq!(format!("{:?}", auth.verifier.issuers[0].algorithms), "[ES256]");
    assert_eq!(auth.verifier.required_scopes, ["mcp", "tools"]);
    assert_eq!(auth.admin_scope, "switchyard:admin");
    assert_eq!(config.core.policy.tools["units_convert"], ["units"]);

    // A symmetric algorithm is refused: the issuer's public key would be the HMAC secret.
    let symmetric = env(&[("SWITCHYARD_AUTH__ISSUERS", r#"[{ issuer = "https://as", algorithms = ["HS256"] }]"#)]);
    let refused = Config::try_from(RawConfig::load(None, symmetric).unwrap()).unwrap_err();
    assert!(refused.to_string().contains("HS256"), "{refused}");
}

#[test]
fn durations() {
    assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
    assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
    assert_eq!(parse_duration("5"), None);
    assert_eq!(parse_duration("x"), None);
}

fn load(pairs: &[(&str, &str)]) -> Result<Config, Vec<String>> {
    Config::load(None, env(pairs)).map_err(|e| e.0)
}

#[test]
fn plugins_are_granted_nothing_by_default() {
    let grants = load(&[]).unwrap().grants;
    assert!(grants.secrets.env.is_empty() && grants.secrets.dirs.is_empty());
    assert!(grants.host_dirs.readable.is_empty() && grants.host_dirs.writable.is_empty());
    assert!(grants.outbound.allowed_ranges.is_empty() && !grants.outbound.allow_link_local);
}

#[test]
fn grants_are_read_and_checked() {
    let grants = load(&[
        ("SWITCHYARD_UPSTREAM__SECRET_ENV", "TOOLS_*,OTHER_KEY"),
        ("SWITCHYARD_UPSTREAM__SECRET_DIRS", "/var/run/secrets/upstream"),
        ("SWITCHYARD_UPSTREAM__ALLOWED_RANGES", "10.0.0.0/8, fd00::/8"),
        ("SWITCHYARD_WASM__GRANTABLE_DIRS", "/srv/data"),
    ])
    .unwrap()
    .grants;
    assert_eq!(grants.secrets.env, ["TOOLS_*", "OTHER_KEY"]);
    assert!(grants.secrets.env_values.is_empty());
    assert_eq!(grants.outbound.allowed_ranges.len(), 2);
    assert_eq!(grants.host_dirs.readable, [std::path::PathBuf::from("/srv/data")]);
    for (key, value, says) in [
        ("SWITCHYARD_UPSTREAM__SECRET_ENV", "*", "every variable"),
        ("SWITCHYARD_UPSTREAM__SECRET_DIRS", "relative", "absolute"),
        ("SWITCHYARD_WASM__GRANTABLE_DIRS", "/", "other than /"),
        ("SWITCHYARD_WASM__WRITABLE_DIRS", "/srv/../etc", "without . or .."),
        ("SWITCHYARD_UPSTREAM__ALLOWED_RANGES", "10.0.0.0", "CIDR"),
    ] {
        let problems = load(&[(key, value)]).unwrap_err();
        assert!(problems.iter().any(|p| p.contains(says)), "{key}={value}: {problems:?}");
    }
}

#[test]
fn only_granted_variables_reach_the_upstream_plugins() {
    let grants = load(&[
        ("SWITCHYARD_UPSTREAM__SECRET_ENV", "TOOLS_*"),
        ("TOOLS_API_KEY", "k3y"),
        ("HOME", "/root"),
        ("SWITCHYARD_ADMIN__TOKEN", "an-admin-token-of-16+"),
    ])
    .unwrap()
    .grants;
    let handed: Vec<_> = grants.secrets.env_values.keys().collect();
    assert_eq!(handed, ["TOOLS_API_KEY"]);
    assert_eq!(grants.secrets.env("TOOLS_API_KEY").unwrap().resolve().unwrap().expose(), "k3y");
    assert!(!format!("{grants:?}").contains("k3y"), "a granted value never shows in Debug");
}

#[test]
fn upstream_limits_are_read_and_checked() {
    let limits =
        load(&[("SWITCHYARD_UPSTREAM__MAX_MESSAGE_BYTES", "1024"), ("SWITCHYARD_UPSTREAM__REFRESH_INTERVAL", "10s")])
            .unwrap()
            .upstream;
    assert_eq!((limits.max_message_bytes, limits.refresh_interval.as_secs()), (1024, 10));
    assert_eq!(limits.max_list_items, 5000, "the rest keep their defaults");
    for (key, value, says) in [
        ("SWITCHYARD_UPSTREAM__MAX_LIST_ITEMS", "0", "upstream.max_list_items: must be at least 1"),
        ("SWITCHYARD_UPSTREAM__LIST_DEADLINE", "soon", "upstream.list_deadline"),
        ("SWITCHYARD_UPSTREAM__MAX_STREAM_BYTES", "10", "at least upstream.max_message_bytes"),
    ] {
        let problems = load(&[(key, value)]).unwrap_err();
        assert!(problems.iter().any(|p| p.contains(says)), "{key}={value}: {problems:?}");
    }
}

#[test]
fn a_memory_budget_bounds_every_instance_at_its_cap() {
    let budgeted = |pairs: &[(&str, &str)]| load(pairs).map(|c| (c.wasm.max_instances, c.wasm.max_memory_bytes >> 20));
    assert_eq!(budgeted(&[]).unwrap(), (64, 256), "no budget: the defaults");
    let budget = ("SWITCHYARD_WASM__MEMORY_BUDGET_MIB", "512");
    assert_eq!(budgeted(&[budget]).unwrap(), (64, 8), "the budget shared by the default instances");
    assert_eq!(budgeted(&[budget, ("SWITCHYARD_WASM__MAX_INSTANCES", "16")]).unwrap(), (16, 32));
    let over = budgeted(&[budget, ("SWITCHYARD_WASM__MAX_MEMORY_MIB", "64")]).unwrap_err();
    assert!(over.iter().any(|p| p.contains("must fit in wasm.memory_budget_mib (512)")), "{over:?}");
    let tiny = budgeted(&[("SWITCHYARD_WASM__MEMORY_BUDGET_MIB", "10")]).unwrap_err();
    assert!(tiny.iter().any(|p| p.contains("memory_budget_mib")), "{tiny:?}");
}
