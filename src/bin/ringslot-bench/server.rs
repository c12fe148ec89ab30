//! The redis-server the benchmark talks to: a temporary one it starts itself with the module
//! loaded (stopped when dropped), or a running one named by `--url`; and the helpers that
//! send commands and read RING.* replies under RESP2 or RESP3.

use anyhow::{anyhow, bail, Context, Result};
use redis::{Connection, Value};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A redis-server started by the benchmark: loopback only, no persistence, in its own
/// temporary directory.
pub struct OwnServer {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl OwnServer {
    /// Starts `redis_server --loadmodule module` on a free loopback port and waits until it
    /// answers `PING` (at most 20 s). Errors: the binary is missing, or the server exits (a
    /// module that fails to load makes it exit; the error quotes its log).
    pub fn start(redis_server: &str, module: &Path) -> Result<OwnServer> {
        let port = free_port()?;
        let dir =
            std::env::temp_dir().join(format!("ringslot-bench-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
        let log = std::fs::File::create(dir.join("server.log"))?;
        let child = Command::new(redis_server)
            .arg("--port")
            .arg(port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&dir)
            .arg("--loadmodule")
            .arg(module)
            .stdout(Stdio::from(log.try_clone()?))
            .stderr(Stdio::from(log))
            .spawn()
            .with_context(|| {
                format!("cannot run `{redis_server}` (install redis-server, or pass --url)")
            })?;
        let mut server = OwnServer { child, port, dir };
        server.wait_ready()?;
        Ok(server)
    }

    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "redis-server exited ({status}) before answering; its log:\n{}",
                    self.log()
                );
            }
            if let Ok(mut con) = connect_quiet(&self.url()) {
                if redis::cmd("PING").query::<String>(&mut con).is_ok() {
                    return Ok(());
                }
            }
            if Instant::now() > deadline {
                bail!(
                    "redis-server did not answer within 20 s; its log:\n{}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(25));
        }
    }

    /// `redis://127.0.0.1:port/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }
}

impl Drop for OwnServer {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            if let Ok(mut con) = connect_quiet(&self.url()) {
                let _: redis::RedisResult<()> =
                    redis::cmd("SHUTDOWN").arg("NOSAVE").query(&mut con);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if matches!(self.child.try_wait(), Ok(None)) {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A free TCP port on 127.0.0.1 (never 6379).
fn free_port() -> Result<u16> {
    loop {
        let listener = TcpListener::bind("127.0.0.1:0").context("bind a loopback port")?;
        let port = listener.local_addr()?.port();
        if port != 6379 {
            return Ok(port);
        }
    }
}

/// The module file: `flag` when given, else `target/release/libringslot.so`, else
/// `target/debug/libringslot.so` (looked up in the current directory, then in the crate's).
pub fn module_path(flag: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = flag {
        if !p.exists() {
            bail!("the module {} does not exist", p.display());
        }
        // redis-server changes into its --dir before loading modules: pass an absolute path.
        return Ok(p.canonicalize().unwrap_or_else(|_| p.to_path_buf()));
    }
    let roots = [
        PathBuf::from("."),
        PathBuf::from(env!("CARGO_MANIFEST_DIR")),
    ];
    for root in &roots {
        for profile in ["release", "debug"] {
            let p = root.join("target").join(profile).join("libringslot.so");
            if p.exists() {
                return Ok(p.canonicalize().unwrap_or(p));
            }
        }
    }
    bail!(
        "no module at target/release/libringslot.so or target/debug/libringslot.so: \
         run `make release` (or `cargo build --lib`), or pass --module PATH"
    )
}

fn connect_quiet(url: &str) -> redis::RedisResult<Connection> {
    redis::Client::open(url)?.get_connection_with_timeout(Duration::from_secs(2))
}

/// A connection to `url`, checked to be a server with the ringslot module loaded.
/// Errors: the URL is malformed, the server is unreachable, or `RING.INFO` is unknown there.
pub fn connect(url: &str) -> Result<Connection> {
    let client = redis::Client::open(url).with_context(|| format!("bad server URL {url}"))?;
    let mut con = client
        .get_connection_with_timeout(Duration::from_secs(5))
        .map_err(|e| anyhow!("cannot reach redis-server at {url}: {e}"))?;
    match redis::cmd("RING.INFO")
        .arg("ringslot-bench:probe")
        .query::<Value>(&mut con)
    {
        Ok(_) => Ok(con),
        Err(e)
            if error_text(&e)
                .to_ascii_lowercase()
                .contains("unknown command") =>
        {
            Err(anyhow!(
                "the ringslot module is not loaded on {url} (it replied `{}`); start redis-server \
             with --loadmodule target/release/libringslot.so, or drop --url",
                error_text(&e)
            ))
        }
        Err(e) => Err(anyhow!("RING.INFO on {url} failed: {}", error_text(&e))),
    }
}

/// The error as the server wrote it (`ERR syntax error`), or the client's description.
pub fn error_text(e: &redis::RedisError) -> String {
    match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => e.to_string(),
    }
}

/// A command from string arguments.
pub fn cmd<S: AsRef<str>>(args: &[S]) -> redis::Cmd {
    let mut c = redis::cmd(args[0].as_ref());
    for a in &args[1..] {
        c.arg(a.as_ref());
    }
    c
}

/// Runs a command; an error names the command and quotes the server's reply.
pub fn run<S: AsRef<str>>(con: &mut Connection, args: &[S]) -> Result<Value> {
    cmd(args).query::<Value>(con).map_err(|e| {
        let line: Vec<&str> = args.iter().map(AsRef::as_ref).take(6).collect();
        anyhow!("`{}` failed: {}", line.join(" "), error_text(&e))
    })
}

/// The field `name` of a map reply: a RESP3 map or a RESP2 flat `[name, value, ...]` array.
pub fn field<'a>(v: &'a Value, name: &str) -> Result<&'a Value> {
    let found = match v {
        Value::Map(entries) => entries
            .iter()
            .find(|(k, _)| text(k).as_deref() == Some(name))
            .map(|(_, v)| v),
        Value::Array(items) => items
            .chunks(2)
            .find(|pair| pair.len() == 2 && text(&pair[0]).as_deref() == Some(name))
            .map(|pair| &pair[1]),
        _ => None,
    };
    found.ok_or_else(|| anyhow!("reply has no field `{name}`: {v:?}"))
}

/// A string reply (bulk or simple), `None` for nil or another type.
pub fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        Value::Okay => Some("OK".into()),
        _ => None,
    }
}

/// An integer reply (or a string holding one).
pub fn int(v: &Value) -> Result<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        other => text(other)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| anyhow!("expected an integer, got {other:?}")),
    }
}

/// A float reply: a RESP3 double or a RESP2 bulk string holding one.
pub fn float(v: &Value) -> Result<f64> {
    match v {
        Value::Double(f) => Ok(*f),
        Value::Int(i) => Ok(*i as f64),
        other => text(other)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| anyhow!("expected a float, got {other:?}")),
    }
}

/// An array reply's items.
pub fn items(v: &Value) -> Result<&[Value]> {
    match v {
        Value::Array(items) | Value::Set(items) => Ok(items),
        other => Err(anyhow!("expected an array, got {other:?}")),
    }
}
