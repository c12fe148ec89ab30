//! A real `redis-server` for tests and benchmarks: started on a free loopback port (never
//! 6379) in its own temporary directory, without persistence unless asked, and stopped when
//! dropped (`SHUTDOWN NOSAVE`, then a kill), also when a test panics.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use crate::error::Error;

/// The workspace root (the directory of the module's `Cargo.toml`).
pub fn workspace_root() -> PathBuf {
    let harness = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    harness.parent().map_or(harness.clone(), Path::to_path_buf)
}

/// A build of the module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// `target/debug/libringslot.so` (what `make test` builds).
    Debug,
    /// `target/release/libringslot.so` (what `make release` builds).
    Release,
}

impl Profile {
    fn dir(self) -> &'static str {
        match self {
            Profile::Debug => "debug",
            Profile::Release => "release",
        }
    }
}

/// The module file the tests load: `RINGSLOT_MODULE` when set, else the debug build in the
/// workspace's `target/`.
pub fn test_module() -> PathBuf {
    match std::env::var_os("RINGSLOT_MODULE") {
        Some(p) => PathBuf::from(p),
        None => module_in(&workspace_root(), Profile::Debug),
    }
}

/// `root/target/<profile>/libringslot.so`.
pub fn module_in(root: &Path, profile: Profile) -> PathBuf {
    root.join("target")
        .join(profile.dir())
        .join("libringslot.so")
}

/// The first module file that exists among `profiles`, looked up under the current directory
/// and then the workspace root; absolute (redis-server changes into its `--dir` before it
/// loads modules).
pub fn find_module(profiles: &[Profile]) -> Option<PathBuf> {
    let roots = [PathBuf::from("."), workspace_root()];
    roots
        .iter()
        .flat_map(|root| profiles.iter().map(move |&p| module_in(root, p)))
        .find(|p| p.exists())
        .map(|p| p.canonicalize().unwrap_or(p))
}

/// The server binary the tests and the benchmark start: `$RINGSLOT_SERVER` when set (a path or
/// a name on the `PATH`, for example a `valkey-server`), else `redis-server`.
pub fn server_binary() -> String {
    std::env::var("RINGSLOT_SERVER")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "redis-server".into())
}

/// What `binary --version` says of itself, for messages (`Redis server v=7.0.15 ...`,
/// `Valkey server v=9.1.2 ...`), cut to its first three words; the binary's name when it
/// cannot say.
pub fn server_version(binary: &str) -> String {
    Command::new(binary)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|v| v.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| binary.to_string())
}

/// [`server_version`], asked once per binary.
fn cached_version(binary: &str) -> String {
    static SEEN: std::sync::Mutex<Vec<(String, String)>> = std::sync::Mutex::new(Vec::new());
    let Ok(mut seen) = SEEN.lock() else {
        return binary.to_string();
    };
    if let Some((_, v)) = seen.iter().find(|(b, _)| b == binary) {
        return v.clone();
    }
    let v = server_version(binary);
    seen.push((binary.to_string(), v.clone()));
    v
}

/// A free TCP port on 127.0.0.1 (never 6379, the port of a developer's own server).
pub fn free_port() -> Result<u16, Error> {
    // Below the kernel's ephemeral range (32768 and up by default), where the source ports of
    // the tests' own client connections come from: a port picked there could be taken by a
    // connection between this check and the server's bind. Another test process can still
    // take it; `ServerBuilder::start` then tries another.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seed = u64::from(std::process::id())
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
    for _ in 0..200 {
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mixed =
            (seed ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xff51_afd7_ed55_8ccd);
        let port = 20000 + (mixed >> 33) % 12000;
        let port = u16::try_from(port).unwrap_or(20000);
        if port != 6379 && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    loop {
        let listener = TcpListener::bind("127.0.0.1:0")
            .map_err(|e| Error(format!("cannot bind a loopback port: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| Error(e.to_string()))?
            .port();
        if port != 6379 {
            return Ok(port);
        }
    }
}

/// How to start a server; see [`Server::builder`].
#[derive(Debug)]
pub struct ServerBuilder {
    binary: String,
    module: Option<PathBuf>,
    module_args: Vec<String>,
    args: Vec<String>,
    dir: Option<tempfile::TempDir>,
    memory_limit: Option<u64>,
    cpu: Option<usize>,
    cluster: bool,
    config: Option<PathBuf>,
    port: Option<u16>,
    tls: Option<std::sync::Arc<crate::tls::Certificates>>,
}

impl ServerBuilder {
    /// TLS only (`--port 0`, `--tls-port`), with `certs`; clients must show a certificate, and
    /// a cluster node speaks TLS on its bus too (`tls-cluster yes`). The server's
    /// [`Server::url`] is then `rediss://` and its clients use the certificates.
    pub fn tls(mut self, certs: &std::sync::Arc<crate::tls::Certificates>) -> Self {
        self.tls = Some(certs.clone());
        self
    }

    /// The `redis-server` binary to run (default: `redis-server` on the `PATH`).
    pub fn binary(mut self, binary: &str) -> Self {
        self.binary = binary.to_string();
        self
    }

    /// Load this module file (default: [`test_module`]).
    pub fn module(mut self, path: &Path) -> Self {
        self.module = Some(path.to_path_buf());
        self
    }

    /// Load no module: Redis itself.
    pub fn no_module(mut self) -> Self {
        self.module = None;
        self
    }

    /// Arguments after the module path on `--loadmodule` (`max-sample 5`).
    pub fn module_args(mut self, args: &[&str]) -> Self {
        self.module_args.extend(args.iter().map(|s| s.to_string()));
        self
    }

    /// Server arguments after the common ones (`--appendonly yes`).
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|s| s.to_string()));
        self
    }

    /// Run in this directory (to restart on the same RDB/AOF files).
    pub fn dir(mut self, dir: tempfile::TempDir) -> Self {
        self.dir = Some(dir);
        self
    }

    /// Cap the server's address space at `bytes` (`ulimit -v`): a command that allocates past
    /// it makes Redis abort with "Out Of Memory" instead of exhausting the machine.
    pub fn memory_limit(mut self, bytes: u64) -> Self {
        self.memory_limit = Some(bytes);
        self
    }

    /// Pin the server to CPU `cpu` (`taskset`, when the machine has it and more than one CPU).
    pub fn pin_cpu(mut self, cpu: usize) -> Self {
        self.cpu = Some(cpu);
        self
    }

    /// Start from the configuration file `path` (relative to the server's directory, which
    /// becomes its working directory), as `redis-server path --port P` would: none of the
    /// builder's defaults and no module but the file's own `loadmodule`.
    pub fn config_file(mut self, path: &Path) -> Self {
        self.config = Some(path.to_path_buf());
        self.module = None;
        self
    }

    /// Listen on `port` rather than a free one (for names that stay the same from run to run);
    /// a port in use is then an error, not a retry.
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Start with `--cluster-enabled yes` (its bus on another free port: the default, port +
    /// 10000, may not exist for a high ephemeral port).
    pub fn cluster(mut self) -> Self {
        self.cluster = true;
        self
    }

    /// Starts the server and waits until it answers `PING` (at most 20 s). Errors: no
    /// `redis-server`, a missing module, or a server that exits (a module that refuses to load
    /// makes it exit; the error quotes its log).
    pub fn start(mut self) -> Result<Server, Error> {
        let mut dir = match self.dir.take() {
            Some(dir) => dir,
            None => tempfile::tempdir().map_err(|e| Error(format!("temp dir: {e}")))?,
        };
        // A port found free can be taken before the server binds it (another test process):
        // then try another.
        let mut tries = 0;
        loop {
            match self.start_in(dir) {
                Ok(server) => return Ok(server),
                Err((e, back))
                    if tries < 5
                        && self.port.is_none()
                        && e.0.contains("Address already in use") =>
                {
                    tries += 1;
                    dir = back;
                }
                Err((e, _)) => return Err(e),
            }
        }
    }

    /// One attempt of [`ServerBuilder::start`], on a free port; a failure gives the
    /// directory back.
    fn start_in(&self, dir: tempfile::TempDir) -> Result<Server, (Error, tempfile::TempDir)> {
        let port = match self.port.map_or_else(free_port, Ok) {
            Ok(port) => port,
            Err(e) => return Err((e, dir)),
        };
        if let Some(config) = &self.config {
            let mut args = vec![
                config.display().to_string(),
                "--port".into(),
                port.to_string(),
            ];
            args.extend(self.args.iter().cloned());
            return Server::spawn(
                &self.binary,
                Command::new(&self.binary),
                &args,
                port,
                dir,
                self.tls.clone(),
            );
        }
        let mut args: Vec<String> = [
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--dir",
            &dir.path().display().to_string(),
            "--save",
            "",
            "--appendonly",
            "no",
            "--enable-debug-command",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        if let Some(tls) = &self.tls {
            // The plain port replaced by the TLS one.
            args.drain(0..2);
            args.extend(tls.server_args(port));
            if self.cluster {
                args.extend(["--tls-cluster".to_string(), "yes".to_string()]);
            }
        }
        if self.cluster {
            let bus = match free_port() {
                Ok(port) => port.to_string(),
                Err(e) => return Err((e, dir)),
            };
            for a in [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
                "--cluster-port",
                &bus,
            ] {
                args.push(a.to_string());
            }
        }
        if let Some(module) = &self.module {
            if !module.exists() {
                let e = Error(format!(
                    "{} is missing: run `make test` (or `cargo build --lib`) first",
                    module.display()
                ));
                return Err((e, dir));
            }
            args.push("--loadmodule".into());
            args.push(module.display().to_string());
            args.extend(self.module_args.iter().cloned());
        }
        args.extend(self.args.iter().cloned());

        let command = match (self.memory_limit, self.cpu) {
            (Some(bytes), _) => {
                // The shell sets the limit, then becomes redis-server (same process).
                let mut sh = Command::new("sh");
                sh.arg("-c")
                    .arg(format!("ulimit -v {} && exec \"$0\" \"$@\"", bytes / 1024))
                    .arg(&self.binary);
                sh
            }
            (None, Some(cpu)) if can_pin() => {
                let mut taskset = Command::new("taskset");
                taskset.arg("-c").arg(cpu.to_string()).arg(&self.binary);
                taskset
            }
            (None, _) => Command::new(&self.binary),
        };
        Server::spawn(&self.binary, command, &args, port, dir, self.tls.clone())
    }
}

/// Whether `taskset` can pin a process here.
fn can_pin() -> bool {
    let cpus = std::thread::available_parallelism().map_or(1, usize::from);
    cpus >= 2
        && Command::new("taskset")
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// A running redis-server, stopped when dropped.
pub struct Server {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its working directory (RDB and AOF files and `server.log` live here).
    pub dir: tempfile::TempDir,
    binary: String,
    tls: Option<std::sync::Arc<crate::tls::Certificates>>,
}

impl Server {
    /// Runs `command args` in `dir` (its output in `dir/server.log`) and waits until the
    /// server answers on `port`; a failure gives the directory back (for another try, or the
    /// caller's data).
    fn spawn(
        binary: &str,
        mut command: Command,
        args: &[String],
        port: u16,
        dir: tempfile::TempDir,
        tls: Option<std::sync::Arc<crate::tls::Certificates>>,
    ) -> Result<Server, (Error, tempfile::TempDir)> {
        let opened = std::fs::File::create(dir.path().join("server.log"))
            .and_then(|log| Ok((log.try_clone()?, log)));
        let (log, log_err) = match opened {
            Ok(files) => files,
            Err(e) => return Err((Error(format!("log file: {e}")), dir)),
        };
        let child = match command
            .args(args)
            .current_dir(dir.path())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            .spawn()
        {
            Ok(child) => child,
            Err(e) => {
                let e = Error(format!(
                    "cannot run `{binary}` ({e}): install redis-server (`make deps`)"
                ));
                return Err((e, dir));
            }
        };
        let mut server = Server {
            child,
            port,
            dir,
            binary: binary.to_string(),
            tls,
        };
        match server.wait_ready() {
            Ok(()) => {
                // Shown with a failing test's output: which server it ran against.
                eprintln!(
                    "ringslot-harness: {} on 127.0.0.1:{port}",
                    cached_version(binary)
                );
                Ok(server)
            }
            Err(e) => Err((e, server.kill())),
        }
    }

    /// A builder: the test module ([`test_module`]) loaded, no persistence, `DEBUG` enabled.
    pub fn builder() -> ServerBuilder {
        ServerBuilder {
            binary: server_binary(),
            module: Some(test_module()),
            module_args: Vec::new(),
            args: Vec::new(),
            dir: None,
            memory_limit: None,
            cpu: None,
            cluster: false,
            config: None,
            port: None,
            tls: None,
        }
    }

    /// Starts a server with the module and the default test settings (panics on failure).
    pub fn start() -> Server {
        Server::builder().start().unwrap_or_else(|e| panic!("{e}"))
    }

    /// Starts a server with `module_args` after the module path and `extra` server
    /// arguments (panics on failure).
    pub fn start_with(module_args: &[&str], extra: &[&str]) -> Server {
        Server::builder()
            .module_args(module_args)
            .args(extra)
            .start()
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Server::start_with`] in an existing directory (a restart on the same files).
    pub fn start_in(dir: tempfile::TempDir, module_args: &[&str], extra: &[&str]) -> Server {
        Server::builder()
            .dir(dir)
            .module_args(module_args)
            .args(extra)
            .start()
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// A plain cluster-enabled redis-server without the module: Redis itself, for answers to
    /// check the engine against (`CLUSTER KEYSLOT`, `redis-cli --cluster`).
    pub fn start_cluster_node(extra: &[&str]) -> Server {
        Server::builder()
            .no_module()
            .cluster()
            .args(extra)
            .start()
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn wait_ready(&mut self) -> Result<(), Error> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(Error(format!(
                    "{} exited ({status}) before answering; its log:\n{}",
                    self.binary,
                    self.log()
                )));
            }
            if let Ok(mut c) = self.try_client() {
                // The server that answers must be this child: when another test process took
                // the port first, this one exits ("Address already in use", then another port
                // is tried) while the other answers.
                if redis::cmd("PING").query::<String>(&mut c).is_ok()
                    && self.answers_as_child(&mut c)
                {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                return Err(Error(format!(
                    "{} did not answer within 20 s; its log:\n{}",
                    self.binary,
                    self.log()
                )));
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// Whether the server behind `c` is this child: `INFO server`'s `process_id` (the ulimit
    /// shell and taskset exec the server, keeping the pid); a server that refuses `INFO` is
    /// taken as this one.
    fn answers_as_child(&self, c: &mut redis::Connection) -> bool {
        let Ok(info) = redis::cmd("INFO").arg("server").query::<String>(c) else {
            return true;
        };
        info.lines()
            .find_map(|l| l.trim().strip_prefix("process_id:"))
            .and_then(|pid| pid.trim().parse::<u32>().ok())
            .is_none_or(|pid| pid == self.child.id())
    }

    /// `redis://127.0.0.1:port/`.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        };
        format!("{scheme}://127.0.0.1:{}/", self.port)
    }

    /// redis-cli's arguments to reach it besides its address (TLS files for a TLS server).
    pub fn cli_args(&self) -> Vec<String> {
        self.tls.as_ref().map_or_else(Vec::new, |t| t.cli_args())
    }

    /// Its TLS certificates, for a TLS-only server.
    pub fn certificates(&self) -> Option<&std::sync::Arc<crate::tls::Certificates>> {
        self.tls.as_ref()
    }

    /// `127.0.0.1:port`, as redis-cli and `CLUSTER NODES` write it.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// A new RESP2 connection, or the client's error.
    pub fn try_client(&self) -> redis::RedisResult<redis::Connection> {
        let client = match &self.tls {
            Some(tls) => {
                ringslot_tool::cluster::link::install_crypto();
                let certs = tls.client_certificates().map_err(|e| {
                    redis::RedisError::from((redis::ErrorKind::ClientError, "TLS", e.0))
                })?;
                redis::Client::build_with_tls(self.url(), certs)?
            }
            None => redis::Client::open(self.url())?,
        };
        client.get_connection_with_timeout(Duration::from_secs(5))
    }

    /// A new RESP2 connection (panics when the server does not answer).
    pub fn client(&self) -> redis::Connection {
        self.try_client().expect("connect to redis-server")
    }

    /// A new RESP3 connection (panics when the server does not answer).
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

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the server (`SHUTDOWN NOSAVE`) and returns its directory for a restart.
    pub fn stop(mut self) -> tempfile::TempDir {
        self.shutdown();
        let empty = tempfile::tempdir().expect("temp dir");
        std::mem::replace(&mut self.dir, empty)
    }

    /// Kills the server with SIGKILL (a crash) and returns its directory for a restart.
    pub fn kill(mut self) -> tempfile::TempDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let empty = tempfile::tempdir().expect("temp dir");
        std::mem::replace(&mut self.dir, empty)
    }

    fn shutdown(&mut self) {
        if let Ok(mut c) = self.try_client() {
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
