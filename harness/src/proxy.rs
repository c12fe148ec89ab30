//! Real cache components on free loopback ports, stopped when dropped: twemproxy (Debian's
//! `nutcracker`) in front of redis-servers or memcached, and `memcached` itself.
//!
//! twemproxy has no live reconfiguration: a changed pool is a new configuration and a new
//! proxy process, which is what its users do and what [`Proxy::start`] makes.

use crate::server::{free_port, Error};
pub use ringslot_tool::members::memcached::text_command;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How a twemproxy pool places keys on its servers (`distribution:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// `ketama`: the libmemcached-compatible ring (160 points per server of weight 1).
    Ketama,
    /// `modula`: the key's hash modulo the servers (each repeated by its weight), in
    /// twemproxy's order: it sorts a pool's servers by name, shorter first, then by bytes.
    Modula,
}

impl Distribution {
    /// The name twemproxy's configuration uses.
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Ketama => "ketama",
            Distribution::Modula => "modula",
        }
    }
}

/// A twemproxy pool's configuration.
#[derive(Debug, Clone)]
pub struct Pool {
    /// The placement.
    pub distribution: Distribution,
    /// The key hash (`md5` places keys as libmemcached does; twemproxy's default is
    /// `fnv1a_64`).
    pub hash: String,
    /// `hash_tag` (for example `{}`), if any.
    pub hash_tag: Option<String>,
    /// Whether the servers speak Redis (`redis: true`) or memcached's protocol.
    pub redis: bool,
    /// The servers, in the order the configuration lists them (twemproxy sorts them: see
    /// [`twemproxy_order`]).
    pub servers: Vec<PoolServer>,
}

/// One server of a [`Pool`].
#[derive(Debug, Clone)]
pub struct PoolServer {
    /// Where it listens, `host:port`.
    pub address: String,
    /// Its weight (1 and up).
    pub weight: u32,
    /// The `name` field: what twemproxy hashes for the server's ketama points and sorts the
    /// pool by. Without it twemproxy names the server `host:port` (`host` alone for port
    /// 11211, as libmemcached and ringslot's ketama flavour do).
    pub name: Option<String>,
}

impl PoolServer {
    /// A server at `address` with `weight` and no `name` field.
    pub fn new(address: impl Into<String>, weight: u32) -> PoolServer {
        PoolServer {
            address: address.into(),
            weight,
            name: None,
        }
    }
}

impl Pool {
    /// The YAML configuration of this pool listening on `port` (no automatic ejection: a
    /// server's keys never move because it was slow once).
    pub fn yaml(&self, port: u16) -> String {
        let mut y = format!(
            "pool:\n  listen: 127.0.0.1:{port}\n  hash: {}\n  distribution: {}\n  redis: {}\n  auto_eject_hosts: false\n  timeout: 10000\n  preconnect: true\n",
            self.hash,
            self.distribution.name(),
            self.redis
        );
        if let Some(tag) = &self.hash_tag {
            y.push_str(&format!("  hash_tag: \"{tag}\"\n"));
        }
        y.push_str("  servers:\n");
        for s in &self.servers {
            y.push_str(&format!("   - {}:{}", s.address, s.weight));
            if let Some(name) = &s.name {
                y.push_str(&format!(" {name}"));
            }
            y.push('\n');
        }
        y
    }
}

/// A running twemproxy, stopped when dropped.
pub struct Proxy {
    child: Child,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    /// Its directory: `nutcracker.yml` and `nutcracker.log`.
    pub dir: tempfile::TempDir,
}

impl Proxy {
    /// Starts `nutcracker` with `pool` on a free port (its statistics on another) and waits
    /// until that process listens on it (at most 10 s; checked in `/proc`, so that a client
    /// never reaches another process that took the port first: then, as when nutcracker exits
    /// on a port taken meanwhile, it tries other ports, five times). Errors: no `nutcracker`
    /// (install Debian's package, `make deps`), a configuration it refuses (its log is
    /// quoted).
    pub fn start(pool: &Pool) -> Result<Proxy, Error> {
        let mut last = Error("nutcracker did not start".into());
        for _ in 0..5 {
            match Proxy::start_once(pool) {
                Ok(proxy) => return Ok(proxy),
                Err((e, retry)) => {
                    last = e;
                    if !retry {
                        break;
                    }
                }
            }
        }
        Err(last)
    }

    /// One try of [`Proxy::start`]; the flag says whether another port may help.
    fn start_once(pool: &Pool) -> Result<Proxy, (Error, bool)> {
        let fail = |e: String| (Error(e), false);
        let dir = tempfile::tempdir().map_err(|e| fail(format!("temp dir: {e}")))?;
        let port = free_port().map_err(|e| (e, false))?;
        let stats = free_port().map_err(|e| (e, false))?;
        let conf = dir.path().join("nutcracker.yml");
        std::fs::write(&conf, pool.yaml(port)).map_err(|e| fail(format!("{e}")))?;
        let log = dir.path().join("nutcracker.log");
        let child = Command::new("nutcracker")
            .arg("-c")
            .arg(&conf)
            .arg("-s")
            .arg(stats.to_string())
            .arg("-a")
            .arg("127.0.0.1")
            .arg("-o")
            .arg(&log)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                fail(format!(
                    "cannot run `nutcracker` ({e}): install twemproxy (Debian's nutcracker, `make deps`)"
                ))
            })?;
        let mut proxy = Proxy { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = proxy.child.try_wait() {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                // A port taken meanwhile: another try.
                let taken = text.contains("Address already in use");
                return Err((
                    Error(format!("nutcracker exited ({status}): {text}")),
                    taken,
                ));
            }
            if listens_on(proxy.child.id(), port) {
                return Ok(proxy);
            }
            if Instant::now() > deadline {
                return Err(fail("nutcracker did not listen within 10 s".into()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Its address, `127.0.0.1:port`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A running `memcached` on 127.0.0.1, stopped when dropped.
pub struct Memcached {
    child: Child,
    /// Its port.
    pub port: u16,
}

impl Memcached {
    /// Starts `memcached` with `megabytes` of item memory on a free port (UDP off) and waits
    /// until it answers `version` (at most 10 s). Errors: no `memcached` (Debian's package,
    /// `make deps`).
    pub fn start(megabytes: u32) -> Result<Memcached, Error> {
        let port = free_port()?;
        let mut command = Command::new("memcached");
        // memcached refuses to run as root unless told which user to be.
        if running_as_root() {
            command.args(["-u", "root"]);
        }
        let child = command
            .args(["-l", "127.0.0.1", "-U", "0", "-p"])
            .arg(port.to_string())
            .arg("-m")
            .arg(megabytes.to_string())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| {
                Error(format!(
                    "cannot run `memcached` ({e}): install it (Debian's memcached, `make deps`)"
                ))
            })?;
        let mut m = Memcached { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = m.child.try_wait() {
                return Err(Error(format!("memcached exited ({status})")));
            }
            if listens_on(m.child.id(), port)
                && m.command("version").is_ok_and(|l| l.starts_with("VERSION"))
            {
                return Ok(m);
            }
            if Instant::now() > deadline {
                return Err(Error("memcached did not answer within 10 s".into()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Its address, `127.0.0.1:port`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Sends one text-protocol line and returns the first line of the answer.
    pub fn command(&self, line: &str) -> Result<String, Error> {
        let mut lines = text_command(&self.address(), line, |l| !l.is_empty())
            .map_err(|e| Error(format!("{e:#}")))?;
        Ok(lines.pop().unwrap_or_default())
    }
}

/// Whether process `pid` has a socket listening on TCP `port` (IPv4): a `LISTEN` entry of
/// `/proc/net/tcp` on that port whose inode is one of the process's descriptors. Linux only
/// (elsewhere `false`).
pub(crate) fn listens_on(pid: u32, port: u16) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else {
        return false;
    };
    let wanted = format!(":{port:04X}");
    let inodes: Vec<String> = table
        .lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let (local, state, inode) = (f.get(1)?, f.get(3)?, f.get(9)?);
            (local.ends_with(&wanted) && *state == "0A").then(|| format!("socket:[{inode}]"))
        })
        .collect();
    if inodes.is_empty() {
        return false;
    }
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path())
            .is_ok_and(|target| inodes.iter().any(|i| target.as_os_str() == i.as_str()))
    })
}

/// Whether this process runs as root (effective uid 0, from `/proc/self/status`; `false`
/// where that file does not exist).
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    })
}

/// Sorts server names into twemproxy's order: shorter first, then by bytes
/// (`conf_validate_server` sorts a pool's servers by name with `string_compare`). Modula's
/// table follows that order, not the configuration's, and so do ketama's collided points:
/// twemproxy sorts its continuum by hash alone with glibc's stable `qsort`, and its lookup
/// takes the first of equal points, so the server earlier in this order owns them.
pub fn twemproxy_order(names: &mut [String]) {
    names.sort_by(|a, b| a.len().cmp(&b.len()).then_with(|| a.cmp(b)));
}

impl Drop for Memcached {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
