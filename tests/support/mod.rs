//! Shared test support: a real `redis-server --loadmodule` with ringslot (or a plain
//! cluster-enabled one), on a free loopback port, in its own temporary directory, stopped
//! when dropped.
//!
//! The module is `target/debug/libringslot.so` (built by `make test` before `cargo test`), or
//! the file named by `RINGSLOT_MODULE`.
#![allow(dead_code)]

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The module file the tests load.
pub fn module_path() -> PathBuf {
    if let Ok(p) = std::env::var("RINGSLOT_MODULE") {
        return PathBuf::from(p);
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    root.join("target").join("debug").join("libringslot.so")
}

/// A free TCP port on 127.0.0.1 (never 6379).
pub fn free_port() -> u16 {
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
        let port = listener.local_addr().expect("local addr").port();
        if port != 6379 {
            return port;
        }
    }
}

/// A running redis-server with the module loaded.
pub struct Server {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its working directory (RDB and AOF files live here).
    pub dir: tempfile::TempDir,
}

impl Server {
    /// Starts a server with the module and the default test settings.
    pub fn start() -> Server {
        Server::start_with(&[], &[])
    }

    /// Starts a server with `module_args` after the module path on `--loadmodule` and `extra`
    /// server arguments (e.g. `["--appendonly", "yes"]`).
    pub fn start_with(module_args: &[&str], extra: &[&str]) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        Server::start_in(dir, module_args, extra)
    }

    /// Starts a server in an existing directory (to restart on the same RDB/AOF files).
    pub fn start_in(dir: tempfile::TempDir, module_args: &[&str], extra: &[&str]) -> Server {
        let module = module_path();
        assert!(
            module.exists(),
            "{} is missing: run `make test` (or `cargo build`) first",
            module.display()
        );
        let mut args: Vec<String> = vec![
            "--enable-debug-command".into(),
            "yes".into(),
            "--repl-diskless-sync-delay".into(),
            "0".into(),
            "--loadmodule".into(),
            module.display().to_string(),
        ];
        args.extend(module_args.iter().map(|s| s.to_string()));
        args.extend(extra.iter().map(|s| s.to_string()));
        Server::spawn(dir, &args)
    }

    /// Starts a plain cluster-enabled redis-server, without the module, with `extra` server
    /// arguments: Redis itself, for answers to check the engine against (`CLUSTER KEYSLOT`,
    /// `redis-cli --cluster`). The cluster bus gets its own free port, since the default
    /// (port + 10000) may not exist for a high ephemeral port.
    pub fn start_cluster_node(extra: &[&str]) -> Server {
        let bus_port = free_port().to_string();
        let mut args: Vec<&str> = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-port",
            &bus_port,
        ];
        args.extend_from_slice(extra);
        let args: Vec<String> = args.into_iter().map(str::to_string).collect();
        Server::spawn(tempfile::tempdir().expect("temp dir"), &args)
    }

    /// Starts a server with the module whose address space is capped at `bytes`
    /// (`ulimit -v`): a command that tries to allocate past it makes Redis abort with "Out Of
    /// Memory" instead of exhausting the machine.
    pub fn start_capped(bytes: u64) -> Server {
        let module = module_path();
        let args: Vec<String> = vec!["--loadmodule".into(), module.display().to_string()];
        Server::spawn_capped(tempfile::tempdir().expect("temp dir"), &args, Some(bytes))
    }

    /// Starts `redis-server` on a free port in `dir`, without persistence, with `args` after
    /// the common ones, and waits until it answers PING.
    fn spawn(dir: tempfile::TempDir, args: &[String]) -> Server {
        Server::spawn_capped(dir, args, None)
    }

    /// [`Server::spawn`], with the address space capped at `limit` bytes when given.
    fn spawn_capped(dir: tempfile::TempDir, args: &[String], limit: Option<u64>) -> Server {
        let port = free_port();
        let mut all: Vec<String> = vec![
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--dir".into(),
            dir.path().display().to_string(),
            "--save".into(),
            "".into(),
            "--appendonly".into(),
            "no".into(),
        ];
        all.extend(args.iter().cloned());
        let log = std::fs::File::create(dir.path().join("server.log")).expect("log file");
        let mut command = match limit {
            None => Command::new("redis-server"),
            Some(bytes) => {
                // The shell sets the limit, then becomes redis-server (same process).
                let mut sh = Command::new("sh");
                sh.arg("-c")
                    .arg(format!(
                        "ulimit -v {} && exec redis-server \"$@\"",
                        bytes / 1024
                    ))
                    .arg("redis-server");
                sh
            }
        };
        let child = command
            .args(&all)
            .stdout(Stdio::from(log.try_clone().expect("log clone")))
            .stderr(Stdio::from(log))
            .spawn()
            .expect("redis-server not found: run `make deps`");
        let mut server = Server { child, port, dir };
        server.wait_ready();
        server
    }

    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("redis-server exited ({status}); log:\n{}", self.log());
            }
            if let Ok(mut c) = redis::Client::open(self.url()).and_then(|c| c.get_connection()) {
                if redis::cmd("PING").query::<String>(&mut c).is_ok() {
                    return;
                }
            }
            assert!(
                Instant::now() < deadline,
                "redis-server did not start:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// `redis://127.0.0.1:port/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A new RESP2 connection.
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect to redis-server")
    }

    /// A new RESP3 connection.
    pub fn client_resp3(&self) -> redis::Connection {
        redis::Client::open(format!("{}?protocol=resp3", self.url()))
            .and_then(|c| c.get_connection())
            .expect("connect to redis-server with RESP3")
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// Whether the process is still running.
    pub fn is_alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Stops the server (SHUTDOWN NOSAVE) and returns its directory for a restart.
    pub fn stop(mut self) -> tempfile::TempDir {
        self.shutdown();
        let dir = tempfile::tempdir().expect("temp dir");
        std::mem::replace(&mut self.dir, dir)
    }

    fn shutdown(&mut self) {
        if let Ok(mut c) = redis::Client::open(self.url()).and_then(|c| c.get_connection()) {
            let _: redis::RedisResult<()> = redis::cmd("SHUTDOWN").arg("NOSAVE").query(&mut c);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.shutdown();
        }
    }
}

/// Bytes from a hex string (vectors files); panics on bad hex, which is a broken vectors file.
pub fn from_hex(hex: &str) -> Vec<u8> {
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
        .collect()
}

/// The rows of a known-answer file under `tests/vectors/` (verbatim copies of the project's
/// shared vectors, each naming its source in its comments), comment lines and header dropped,
/// each row split on tabs.
pub fn vectors(name: &str) -> Vec<Vec<String>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("vectors")
        .join(name);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .skip(1)
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}
