//! Real load balancers placing keys on a consistent-hash ring, in front of backends that answer
//! their own name: the truth for ringslot's `nginx` and `haproxy` flavours.
//!
//! - [`Nginx`] (Debian's `nginx-light` 1.22): `hash $arg_key consistent`; one nginx process
//!   serves both the proxy and every backend (a `server` block per backend, on the address its
//!   name gives).
//! - [`Haproxy`] (Debian's `haproxy` 2.6): `balance url_param key` with `hash-type consistent`
//!   (and a named hash function); its backends are frontends of the same process that answer
//!   with the server's name (`http-request return`), or servers of the caller's
//!   ([`Haproxy::start_in_front`], e.g. ones that hold requests open).
//! - [`Nginx::start_memcached`]: nginx in front of memcached servers (`memcached_pass`), the
//!   server that answered in an `X-Upstream` header: a cache fleet behind nginx.

use crate::proxy::listens_on;
use crate::server::{free_port, Error};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One `server` of the upstream, as the configuration writes it.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// The server's text: `127.0.0.1:port`, `localhost:port` or `unix:/path`; the backend
    /// listening there answers it as its body.
    pub server: String,
    /// `weight=`, >= 1.
    pub weight: u32,
}

/// A running nginx with one consistent-hash upstream, stopped when dropped.
pub struct Nginx {
    child: Child,
    /// The proxy's port on 127.0.0.1.
    pub port: u16,
    /// Its prefix directory (configuration, logs, temp files, unix sockets).
    pub dir: tempfile::TempDir,
}

impl Nginx {
    /// A fresh temporary directory to hold unix sockets named in `servers` before the
    /// proxy starts ([`Nginx::start_in`]).
    pub fn socket_dir() -> Result<tempfile::TempDir, Error> {
        tempfile::tempdir().map_err(|e| Error(format!("temp dir: {e}")))
    }

    /// Starts nginx in `dir` with `upstream` (in order) behind `hash $arg_key consistent` on a
    /// free port, each backend answering `200` with its server text, and waits until it
    /// answers (at most 10 s). Tries other ports when one is taken meanwhile (five times).
    /// Errors: no `nginx` (Debian's `nginx-light`, `make deps`), a refused configuration (its
    /// log quoted).
    pub fn start_in(dir: tempfile::TempDir, upstream: &[Upstream]) -> Result<Nginx, Error> {
        Nginx::start_with(dir, &|d, port| config(d, port, upstream))
    }

    /// Starts nginx in front of memcached `servers` (`127.0.0.1:port`, in order) on a free
    /// port: `GET /?key=<key>` is `memcached_pass` to the server `hash $arg_key consistent`
    /// picks (the key as sent, not URL-decoded), answering `200` with the value or `404`,
    /// either with the server's address in an `X-Upstream` header (`$upstream_addr`). nginx
    /// only reads memcached: a client writes a miss to that server itself. Waits as
    /// [`Nginx::start_in`] does; errors as it does.
    pub fn start_memcached(servers: &[String]) -> Result<Nginx, Error> {
        let dir = Nginx::socket_dir()?;
        Nginx::start_with(dir, &|d, port| memcached_config(d, port, servers))
    }

    /// Starts nginx in `dir` with the configuration `config(dir, port)` on a free port, trying
    /// other ports when one is taken meanwhile (five times).
    fn start_with(
        dir: tempfile::TempDir,
        config: &dyn Fn(&std::path::Path, u16) -> String,
    ) -> Result<Nginx, Error> {
        let mut dir = Some(dir);
        let mut last = Error("nginx did not start".into());
        for _ in 0..5 {
            let Some(d) = dir.take() else { break };
            match Nginx::start_once(d, config) {
                Ok(n) => return Ok(n),
                Err((e, back)) => {
                    last = e;
                    dir = back;
                }
            }
        }
        Err(last)
    }

    /// One try of [`Nginx::start_in`]; gives the directory back when another port may help.
    fn start_once(
        dir: tempfile::TempDir,
        config: &dyn Fn(&std::path::Path, u16) -> String,
    ) -> Result<Nginx, (Error, Option<tempfile::TempDir>)> {
        let port = match free_port() {
            Ok(p) => p,
            Err(e) => return Err((e, None)),
        };
        let conf = dir.path().join("nginx.conf");
        let log = dir.path().join("error.log");
        let _ = std::fs::remove_file(&log);
        if let Err(e) = std::fs::write(&conf, config(dir.path(), port)) {
            return Err((Error(format!("{e}")), None));
        }
        let child = Command::new("nginx")
            .arg("-p")
            .arg(dir.path())
            .arg("-e")
            .arg(&log)
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) => {
                return Err((
                    Error(format!(
                        "cannot run `nginx` ({e}): install it (Debian's nginx-light, `make deps`)"
                    )),
                    None,
                ))
            }
        };
        let mut child = child;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let e = Error(format!("nginx exited ({status}): {text}"));
                let taken = text.contains("Address already in use");
                return Err((e, taken.then_some(dir)));
            }
            if listens_on(child.id(), port) {
                return Ok(Nginx { child, port, dir });
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err((Error("nginx did not listen within 10 s".into()), None));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The server nginx sends each key to, in order: `GET /?key=<key>` through the proxy, the
    /// body being the backend's server text. Keys must be query-safe (nginx hashes `$arg_key`
    /// as sent, not URL-decoded).
    pub fn owners(&self, keys: &[String]) -> Result<Vec<String>, Error> {
        http_owners(self.port, keys)
    }
}

/// The body of `GET /?key=<key>` for each key through the proxy on `port`, in order, on one
/// keep-alive connection with 64 requests in flight (HTTP/1.1 pipelining).
fn http_owners(port: u16, keys: &[String]) -> Result<Vec<String>, Error> {
    let fail = |e: std::io::Error| Error(format!("proxy on port {port}: {e}"));
    let stream = TcpStream::connect(("127.0.0.1", port)).map_err(fail)?;
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(fail)?;
    let mut writer = stream.try_clone().map_err(fail)?;
    let mut reader = BufReader::new(stream);
    let mut out = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(64) {
        let mut request = String::new();
        for key in chunk {
            request.push_str(&format!("GET /?key={key} HTTP/1.1\r\nHost: ring\r\n\r\n"));
        }
        writer.write_all(request.as_bytes()).map_err(fail)?;
        for _ in chunk {
            out.push(read_response(&mut reader).map_err(fail)?);
        }
    }
    Ok(out)
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One HTTP/1.1 response's body (Content-Length framed); an error for a status other than 200.
fn read_response(reader: &mut impl BufRead) -> std::io::Result<String> {
    let bad = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
    let mut status = String::new();
    reader.read_line(&mut status)?;
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 {
            return Err(bad("connection closed in headers".into()));
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse::<usize>().ok();
            }
        }
    }
    let mut body = vec![0; length.ok_or_else(|| bad(format!("no length: {status}")))?];
    reader.read_exact(&mut body)?;
    if !status.contains(" 200 ") {
        return Err(bad(format!(
            "{}: {}",
            status.trim_end(),
            String::from_utf8_lossy(&body)
        )));
    }
    String::from_utf8(body).map_err(|e| bad(format!("{e}")))
}

/// The configuration: a single process in the foreground, the upstream, the proxy and one
/// backend `server` block per upstream server.
fn config(dir: &std::path::Path, port: u16, upstream: &[Upstream]) -> String {
    let mut servers = String::new();
    let mut backends = String::new();
    for u in upstream {
        servers.push_str(&format!(
            "        server {} weight={};\n",
            u.server, u.weight
        ));
        backends.push_str(&format!(
            "    server {{ listen {}; location / {{ return 200 \"{}\"; }} }}\n",
            u.server, u.server
        ));
    }
    http_config(
        dir,
        &servers,
        &format!(
            "    server {{\n        listen 127.0.0.1:{port};\n        location / {{\n            \
             proxy_pass http://ring;\n            proxy_http_version 1.1;\n            \
             proxy_set_header Connection \"\";\n            proxy_next_upstream off;\n        }}\n    }}\n\
             {backends}"
        ),
    )
}

/// The configuration in front of memcached servers: `memcached_pass` with the key from
/// `$arg_key`, the upstream's address in `X-Upstream` on every answer (404s too).
fn memcached_config(dir: &std::path::Path, port: u16, servers: &[String]) -> String {
    let upstream: String = servers
        .iter()
        .map(|s| format!("        server {s};\n"))
        .collect();
    http_config(
        dir,
        &upstream,
        &format!(
            "    server {{\n        listen 127.0.0.1:{port};\n        location / {{\n            \
             set $memcached_key $arg_key;\n            memcached_pass ring;\n            \
             memcached_next_upstream off;\n            \
             add_header X-Upstream $upstream_addr always;\n        }}\n    }}\n"
        ),
    )
}

/// A single process in the foreground with its files in `dir`, the consistent-hash upstream
/// `ring` of `servers` (its `server` lines) and the `blocks` (its `server` blocks).
fn http_config(dir: &std::path::Path, servers: &str, blocks: &str) -> String {
    let d = dir.display();
    format!(
        "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log warn;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n    access_log off;\n    client_body_temp_path {d}/body;\n    \
         proxy_temp_path {d}/proxy;\n    fastcgi_temp_path {d}/fastcgi;\n    \
         uwsgi_temp_path {d}/uwsgi;\n    scgi_temp_path {d}/scgi;\n    \
         keepalive_requests 1000000;\n    default_type text/plain;\n\
         \x20   upstream ring {{\n        hash $arg_key consistent;\n{servers}        keepalive 16;\n    }}\n\
         {blocks}}}\n"
    )
}

/// One server of an HAProxy backend, in declaration order (its `puid` is its place, from 1).
#[derive(Debug, Clone)]
pub struct HaproxyServer {
    /// The server's name (what its backend answers).
    pub name: String,
    /// `weight`, 1..=256.
    pub weight: u32,
}

/// A running HAProxy with one `balance url_param key` backend under `hash-type consistent`,
/// stopped when dropped.
pub struct Haproxy {
    child: Child,
    /// The proxy's port on 127.0.0.1.
    pub port: u16,
    /// Its directory (the configuration).
    pub dir: tempfile::TempDir,
}

impl Haproxy {
    /// Starts `haproxy` with `servers` (in order) and `hash_type` (what follows `hash-type`:
    /// `consistent`, `consistent crc32`, ...), every server a frontend of the same process on
    /// a free port answering its name (`noreuseport`: HAProxy binds with `SO_REUSEPORT`
    /// otherwise, and a port another process holds would be shared, not refused), and waits until the proxy answers (at most 10 s; other
    /// ports when one was taken meanwhile, three times). Errors: no `haproxy` (Debian's
    /// package, `make deps`), a refused configuration (its output quoted).
    pub fn start(servers: &[HaproxyServer], hash_type: &str) -> Result<Haproxy, Error> {
        Haproxy::start_with(servers, hash_type, None, "")
    }

    /// Starts `haproxy` as [`Haproxy::start`] does, but in front of servers that listen at
    /// `addresses` (`host:port`, one per server, in order; started by the caller), with the
    /// `backend` lines `extra` added (for example `hash-balance-factor 150`). Errors: as
    /// [`Haproxy::start`]'s, and a count of addresses other than one per server.
    pub fn start_in_front(
        servers: &[HaproxyServer],
        addresses: &[String],
        hash_type: &str,
        extra: &str,
    ) -> Result<Haproxy, Error> {
        if addresses.len() != servers.len() {
            return Err(Error("one address per server".into()));
        }
        Haproxy::start_with(servers, hash_type, Some(addresses), extra)
    }

    fn start_with(
        servers: &[HaproxyServer],
        hash_type: &str,
        addresses: Option<&[String]>,
        extra: &str,
    ) -> Result<Haproxy, Error> {
        let mut last = Error("haproxy did not start".into());
        for _ in 0..3 {
            match Haproxy::start_once(servers, hash_type, addresses, extra) {
                Ok(h) => return Ok(h),
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

    fn start_once(
        servers: &[HaproxyServer],
        hash_type: &str,
        addresses: Option<&[String]>,
        extra: &str,
    ) -> Result<Haproxy, (Error, bool)> {
        let fail = |e: String| (Error(e), false);
        let dir = tempfile::tempdir().map_err(|e| fail(format!("temp dir: {e}")))?;
        let port = free_port().map_err(|e| (e, false))?;
        let mut backend = String::new();
        let mut fronts = String::new();
        for (i, s) in servers.iter().enumerate() {
            let address = match addresses.and_then(|a| a.get(i)) {
                Some(a) => a.clone(),
                None => {
                    let p = free_port().map_err(|e| (e, false))?;
                    fronts.push_str(&format!(
                        "frontend f-{}\n    bind 127.0.0.1:{p}\n    \
                         http-request return status 200 content-type text/plain string \"{}\"\n",
                        s.name, s.name
                    ));
                    format!("127.0.0.1:{p}")
                }
            };
            backend.push_str(&format!(
                "    server {} {address} weight {}\n",
                s.name, s.weight
            ));
        }
        let extra: String = extra.lines().map(|l| format!("    {l}\n")).collect();
        let conf = format!(
            "global\n    maxconn 2000\n    noreuseport\n\
             defaults\n    mode http\n    timeout connect 5s\n    timeout client 60s\n    \
             timeout server 60s\n\
             frontend proxy\n    bind 127.0.0.1:{port}\n    default_backend ring\n\
             backend ring\n    balance url_param key\n    hash-type {hash_type}\n{extra}{backend}\
             {fronts}"
        );
        let path = dir.path().join("haproxy.cfg");
        std::fs::write(&path, conf).map_err(|e| fail(format!("{e}")))?;
        let log = dir.path().join("haproxy.out");
        let out = std::fs::File::create(&log).map_err(|e| fail(format!("{e}")))?;
        let err = out.try_clone().map_err(|e| fail(format!("{e}")))?;
        let mut child = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| {
                fail(format!(
                    "cannot run `haproxy` ({e}): install it (Debian's haproxy, `make deps`)"
                ))
            })?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let taken = text.contains("cannot bind") || text.contains("Address already in use");
                return Err((Error(format!("haproxy exited ({status}): {text}")), taken));
            }
            if listens_on(child.id(), port) {
                return Ok(Haproxy { child, port, dir });
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(fail("haproxy did not listen within 10 s".into()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The server HAProxy sends each key to, in order (`GET /?key=<key>`, the body being the
    /// server's name). HAProxy hashes the parameter's bytes as sent.
    pub fn owners(&self, keys: &[String]) -> Result<Vec<String>, Error> {
        http_owners(self.port, keys)
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
