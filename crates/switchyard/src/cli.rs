//! `switchyard plugin …`: the operator's commands, as calls to the admin API
//! of a running server, so they work against any replica and script well.
//!
//! The server's address and admin token come from the same configuration the
//! server reads (`--config`, `SWITCHYARD_*`), or from `--server`.

use std::path::PathBuf;

use anyhow::{Context as _, bail};
use clap::Subcommand;
use serde_json::{Value, json};

use crate::config::Config;

/// A `switchyard plugin` command.
#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Register a plugin. A WASM module given with --wasm is uploaded first.
    Add {
        /// The namespace: its tools are published as NAMESPACE_TOOL.
        namespace: String,
        /// builtin, wasm or upstream (implied by --wasm).
        #[arg(long)]
        kind: Option<String>,
        /// The spec as JSON, or @FILE to read it from a file.
        #[arg(long)]
        spec: Option<String>,
        /// A WASM module to upload; its digest becomes spec.artifact.
        #[arg(long)]
        wasm: Option<PathBuf>,
        /// Register it disabled.
        #[arg(long)]
        disabled: bool,
    },
    /// List the registered plugins.
    List,
    /// Show one plugin (by id or namespace) and the tools it serves.
    Show {
        /// Id or namespace.
        plugin: String,
    },
    /// Enable a plugin (by id or namespace).
    Enable {
        /// Id or namespace.
        plugin: String,
    },
    /// Disable a plugin (by id or namespace).
    Disable {
        /// Id or namespace.
        plugin: String,
    },
    /// Remove a plugin (by id or namespace).
    Remove {
        /// Id or namespace.
        plugin: String,
    },
}

/// A client of the admin API.
pub struct AdminClient {
    base: String,
    token: Option<switchyard_settings::Secret>,
    http: reqwest::Client,
}

impl AdminClient {
    /// The admin API of the server `config` describes, or at `server`
    /// (`http://host:port`, the prefix is added).
    ///
    /// # Errors
    /// When the configuration disables the admin API.
    pub fn new(config: &Config, server: Option<&str>) -> anyhow::Result<Self> {
        let admin = config.admin.as_ref().context("the admin API is disabled in this configuration (admin.enabled)")?;
        let base = match server {
            Some(server) => server.trim_end_matches('/').to_owned(),
            None => {
                let mut address = admin.bind.unwrap_or(config.bind);
                if address.ip().is_unspecified() {
                    address.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
                }
                format!("http://{address}")
            }
        };
        Ok(Self {
            base: format!("{base}{}", admin.api.prefix),
            token: admin.token.clone(),
            http: reqwest::Client::new(),
        })
    }

    async fn call(&self, request: reqwest::RequestBuilder) -> anyhow::Result<Value> {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token.expose()),
            None => request,
        };
        let response = request.send().await.with_context(|| format!("cannot reach the admin API at {}", self.base))?;
        let status = response.status();
        let body: Value = if status == reqwest::StatusCode::NO_CONTENT { json!({}) } else { response.json().await? };
        if !status.is_success() {
            let message = body["error"]["message"].as_str().unwrap_or("no message");
            bail!("{status}: {message}");
        }
        Ok(body)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Finds a plugin by id or namespace.
    async fn find(&self, plugin: &str) -> anyhow::Result<Value> {
        let all = self.call(self.http.get(self.url("/plugins"))).await?;
        all["plugins"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["id"] == plugin || p["namespace"] == plugin)
            .cloned()
            .with_context(|| format!("no plugin with id or namespace {plugin}"))
    }

    /// Runs `command`; returns what to print.
    ///
    /// # Errors
    /// When the server refuses or cannot be reached; the message says why.
    pub async fn run(&self, command: PluginCommand) -> anyhow::Result<String> {
        match command {
            PluginCommand::Add { namespace, kind, spec, wasm, disabled } => {
                let mut spec: Value = match spec {
                    None => json!({}),
                    Some(text) => {
                        let text = match text.strip_prefix('@') {
                            Some(path) => std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?,
                            None => text,
                        };
                        serde_json::from_str(&text).context("--spec is not JSON")?
                    }
                };
                if let Some(path) = &wasm {
                    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
                    let uploaded = self
                        .call(
                            self.http
                                .post(self.url("/artifacts"))
                                .header("content-type", "application/wasm")
                                .body(bytes),
                        )
                        .await?;
                    spec["artifact"] = uploaded["sha256"].clone();
                }
                let kind = kind.unwrap_or_else(|| if wasm.is_some() { "wasm".into() } else { "builtin".into() });
                let body = json!({"namespace": namespace, "kind": kind, "spec": spec, "enabled": !disabled});
                let created = self.call(self.http.post(self.url("/plugins")).json(&body)).await?;
                let id = created["id"].as_str().unwrap_or_default();
                let tools = self.call(self.http.get(self.url(&format!("/plugins/{id}/tools")))).await?;
                Ok(format!("registered {id}\n{}", tool_names(&tools)))
            }
            PluginCommand::List => {
                let all = self.call(self.http.get(self.url("/plugins"))).await?;
                let text = |value: &Value| value.as_str().map_or_else(|| value.to_string(), str::to_owned);
                let rows =
                    all["plugins"].as_array().into_iter().flatten().map(|p| {
                        ["id", "namespace", "kind", "enabled", "version"].map(|field| text(&p[field])).to_vec()
                    });
                Ok(table(&["ID", "NAMESPACE", "KIND", "ENABLED", "VERSION"], rows))
            }
            PluginCommand::Show { plugin } => {
                let mut found = self.find(&plugin).await?;
                let id = found["id"].as_str().unwrap_or_default().to_owned();
                let tools = self.call(self.http.get(self.url(&format!("/plugins/{id}/tools")))).await?;
                found["tools"] = tools["tools"].clone();
                Ok(serde_json::to_string_pretty(&found)?)
            }
            PluginCommand::Enable { plugin } => self.switch(&plugin, "enable").await,
            PluginCommand::Disable { plugin } => self.switch(&plugin, "disable").await,
            PluginCommand::Remove { plugin } => {
                let found = self.find(&plugin).await?;
                let (id, version) = (found["id"].as_str().unwrap_or_default(), &found["version"]);
                self.call(self.http.delete(self.url(&format!("/plugins/{id}?version={version}")))).await?;
                Ok(format!("removed {id}"))
            }
        }
    }

    async fn switch(&self, plugin: &str, action: &str) -> anyhow::Result<String> {
        let found = self.find(plugin).await?;
        let id = found["id"].as_str().unwrap_or_default();
        let body = json!({"version": found["version"]});
        let changed = self.call(self.http.post(self.url(&format!("/plugins/{id}/{action}"))).json(&body)).await?;
        Ok(format!("{id} {action}d (version {})", changed["version"]))
    }
}

/// Rows under a header, every column as wide as its widest cell and two
/// spaces apart: the one layout of every listing the CLI prints.
fn table(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let rows: Vec<Vec<String>> =
        std::iter::once(header.iter().map(|h| (*h).to_owned()).collect()).chain(rows).collect();
    let mut widths = vec![0; header.len()];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let lines: Vec<String> = rows
        .iter()
        .map(|row| {
            let cells = row.iter().zip(&widths).map(|(cell, width)| format!("{cell:<width$}"));
            cells.collect::<Vec<_>>().join("  ").trim_end().to_owned()
        })
        .collect();
    lines.join("\n")
}

fn tool_names(tools: &Value) -> String {
    let names: Vec<&str> = tools["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
    if names.is_empty() { "serving no tools".into() } else { format!("tools: {}", names.join(", ")) }
}

#[cfg(test)]
mod tests {
    use super::table;

    #[test]
    fn columns_line_up_whatever_the_widths_of_their_values() {
        let rows = [
            vec!["plg_1".to_owned(), "units".into(), "wasm".into(), "true".into(), "3".into()],
            vec!["plg_0123456789".to_owned(), "t".into(), "upstream".into(), "false".into(), "12".into()],
        ];
        let printed = table(&["ID", "NAMESPACE", "KIND", "ENABLED", "VERSION"], rows);
        let lines: Vec<&str> = printed.lines().collect();
        assert_eq!(lines[0], "ID              NAMESPACE  KIND      ENABLED  VERSION");
        assert_eq!(lines[1], "plg_1           units      wasm      true     3");
        assert_eq!(lines[2], "plg_0123456789  t          upstream  false    12");
    }
}
