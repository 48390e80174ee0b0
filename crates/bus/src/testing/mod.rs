//! Redis servers of a test's own, for the suites that must kill, restart or
//! cluster Redis (the bus here, the rate limiter, the end-to-end tests): a
//! [`RedisServer`] on a free loopback port, and a [`RedisCluster`] of three
//! such servers joined by `redis-cli --cluster create`. Both come from
//! Debian's `redis-server` package and stop when dropped.
//!
//! Tests that only need *a* Redis use the running one (`TEST_REDIS_URL`).
//! [`contract`] holds what every bus implementation must do, for each to
//! run against itself.
//!
//! Behind the `testing` feature: the product does not carry it.

pub mod contract;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A free TCP port on loopback (bound and released; good enough for tests).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port()
}

/// Waits until something accepts connections on `port`.
async fn wait_for_port(port: u16) -> bool {
    for _ in 0..250 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// A `redis-server` of this test's own, keeping nothing on disk.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    /// Extra arguments (cluster mode, TLS) and the directory they write to.
    extra: Vec<String>,
    dir: Option<PathBuf>,
    /// For a TLS server: the CA that signed its certificate.
    ca_file: Option<PathBuf>,
}

impl RedisServer {
    /// Starts one and waits until it accepts connections.
    ///
    /// # Panics
    /// When `redis-server` cannot run or does not come up within 5 s.
    pub async fn start() -> Self {
        let mut server = Self { child: None, port: free_port(), extra: Vec::new(), dir: None, ca_file: None };
        server.restart().await;
        server
    }

    /// Starts one that speaks only TLS, with a certificate for 127.0.0.1
    /// signed by a CA made for it ([`RedisServer::ca_file`]); clients need
    /// no certificate of their own.
    ///
    /// # Panics
    /// When `openssl` cannot make the certificates, or the server does not start.
    pub async fn start_tls() -> Self {
        let dir = std::env::temp_dir().join(format!("switchyard-redis-tls-{:x}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n").expect("write san.ext");
        for step in [
            "req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=switchyard-test-ca -keyout ca.key -out ca.pem",
            "req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout redis.key -out redis.csr",
            "x509 -req -days 2 -in redis.csr -CA ca.pem -CAkey ca.key -CAcreateserial -extfile san.ext -out redis.pem",
        ] {
            let status = Command::new("openssl")
                .args(step.split(' '))
                .current_dir(&dir)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("openssl");
            assert!(status.success(), "openssl {step}");
        }
        let file = |name: &str| dir.join(name).to_string_lossy().into_owned();
        let port = free_port();
        let extra = vec![
            "--port".into(),
            "0".into(),
            "--tls-port".into(),
            port.to_string(),
            "--tls-cert-file".into(),
            file("redis.pem"),
            "--tls-key-file".into(),
            file("redis.key"),
            "--tls-ca-cert-file".into(),
            file("ca.pem"),
            "--tls-auth-clients".into(),
            "no".into(),
        ];
        let ca_file = Some(dir.join("ca.pem"));
        let mut server = Self { child: None, port, extra, dir: Some(dir), ca_file };
        server.restart().await;
        server
    }

    /// `redis://127.0.0.1:PORT`, or `rediss://…` for a TLS server.
    pub fn url(&self) -> String {
        let scheme = if self.ca_file.is_some() { "rediss" } else { "redis" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// The CA certificate (PEM) of a TLS server.
    pub fn ca_file(&self) -> Option<&std::path::Path> {
        self.ca_file.as_deref()
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Kills it (SIGKILL: connections drop without a goodbye).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port, empty, and waits until it accepts
    /// connections.
    ///
    /// # Panics
    /// When it does not come up within 5 s.
    pub async fn restart(&mut self) {
        self.kill();
        let mut command = Command::new("redis-server");
        // A TLS server's `--port 0` in `extra` comes later and wins.
        command
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(&self.extra)
            .stdout(Stdio::null());
        if let Some(dir) = &self.dir {
            command.current_dir(dir);
        }
        self.child = Some(command.spawn().expect("redis-server (Debian's redis-server package)"));
        assert!(wait_for_port(self.port).await, "redis-server did not start on port {}", self.port);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        // A TLS server's directory (its certificates) is its own; a cluster node's is the cluster's.
        if let (Some(_), Some(dir)) = (&self.ca_file, &self.dir) {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Three `redis-server`s in cluster mode, every slot covered, no replicas.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    dir: PathBuf,
}

impl RedisCluster {
    /// Starts the nodes, creates the cluster and waits until every node says
    /// `cluster_state:ok`.
    ///
    /// # Panics
    /// When a node does not start or the cluster does not form.
    pub async fn start() -> Self {
        let dir = std::env::temp_dir().join(format!("switchyard-redis-cluster-{:x}", rand::random::<u64>()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let mut nodes = Vec::new();
        for _ in 0..3 {
            let port = free_port();
            let extra = ["--cluster-enabled", "yes", "--cluster-config-file", &format!("nodes-{port}.conf")];
            let mut node = RedisServer {
                child: None,
                port,
                extra: extra.map(String::from).to_vec(),
                dir: Some(dir.clone()),
                ca_file: None,
            };
            node.restart().await;
            nodes.push(node);
        }
        let addresses: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        let created = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .output()
            .expect("redis-cli");
        assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stdout));
        for node in &nodes {
            let mut ok = false;
            for _ in 0..250 {
                let info = Command::new("redis-cli")
                    .args(["-p", &node.port.to_string(), "cluster", "info"])
                    .output()
                    .expect("redis-cli");
                if String::from_utf8_lossy(&info.stdout).contains("cluster_state:ok") {
                    ok = true;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert!(ok, "the cluster did not form on port {}", node.port);
        }
        Self { nodes, dir }
    }

    /// The URLs of the nodes numbered `seeds`, comma-separated (the form
    /// `redis_url` takes in cluster mode).
    pub fn url(&self, seeds: &[usize]) -> String {
        seeds.iter().map(|i| self.nodes[*i].url()).collect::<Vec<_>>().join(",")
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A TCP relay in front of a Redis server that a test can cut and restore:
/// whoever connects through it (one replica) is cut off from Redis, its
/// connections dropped and new ones refused, while the others go on.
#[derive(Debug)]
pub struct Partition {
    port: u16,
    cut: tokio::sync::watch::Sender<bool>,
    accepting: tokio::task::JoinHandle<()>,
}

impl Partition {
    /// Starts relaying from a free loopback port to `target`'s port.
    ///
    /// # Panics
    /// When it cannot listen on loopback.
    pub async fn start(target: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let (cut, is_cut) = tokio::sync::watch::channel(false);
        let accepting = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if *is_cut.borrow() {
                    continue; // dropped: refused
                }
                let mut is_cut = is_cut.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", target)).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = is_cut.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        Self { port, cut, accepting }
    }

    /// `redis://` through the relay.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Drops every relayed connection and refuses new ones.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Relays again.
    pub fn restore(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.cut();
        self.accepting.abort();
    }
}
