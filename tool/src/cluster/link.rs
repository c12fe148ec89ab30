//! How the tool reaches the nodes it reads: the seed's URL (`redis://` or `rediss://`, with
//! `user:password@`), a password from `REDISCLI_AUTH` or a file rather than the command line,
//! the TLS files (a CA, a client certificate and its key; TLS by rustls, so that a host needs
//! no libssl), and the bound on every wait: connecting and each reply. A node that does not
//! answer in time is an error that names it, never a hang.

use anyhow::{anyhow, bail, Context, Result};
use redis::{ClientTlsConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, TlsCertificates};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The TLS files, as `redis-cli --cacert --cert --key` takes them (PEM).
#[derive(Debug, Clone, Default)]
pub struct TlsFiles {
    /// The CA that signed the nodes' certificates (else the system's trust store).
    pub ca_cert: Option<PathBuf>,
    /// A client certificate and its key, for nodes that ask for one (`tls-auth-clients`).
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
}

/// How to reach the nodes besides their addresses: the seed's connection (credentials, TLS
/// parameters, database), which every other node takes with its own address, and the bound
/// on every wait.
#[derive(Debug, Clone)]
pub struct Access {
    seed: ConnectionInfo,
    /// The most a connection may take to open, and each reply to come.
    pub timeout: Duration,
}

/// One node as the tool reaches it.
#[derive(Debug, Clone)]
pub struct Link {
    /// `host:port`, as errors and reports name the node.
    pub address: String,
    info: ConnectionInfo,
    timeout: Duration,
}

/// Installs rustls' crypto provider for the process (ring); a second call does nothing. Every
/// TLS connection needs it first (the test harness's too).
pub fn install_crypto() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>> {
    std::fs::read(path).with_context(|| format!("cannot read the {what} {}", path.display()))
}

impl Access {
    /// The access of the seed at `url` (`redis://[user[:password]@]host:port[/db]`, or
    /// `rediss://` for TLS). The password is the URL's, else `REDISCLI_AUTH`'s (as redis-cli
    /// reads it), else the first line of `password_file`. Errors: a malformed URL, TLS files
    /// without `rediss://`, a certificate without its key, a file that cannot be read.
    pub fn new(
        url: &str,
        user: Option<&str>,
        password_file: Option<&Path>,
        tls: &TlsFiles,
        timeout: Duration,
    ) -> Result<Access> {
        if timeout.is_zero() {
            bail!("--timeout must be above 0");
        }
        if !url.starts_with("redis://") && !url.starts_with("rediss://") {
            bail!("give the seed as a URL: redis://host:port, or rediss://host:port for TLS (got {url})");
        }
        let mut info = url
            .into_connection_info()
            .map_err(|e| anyhow!("bad seed URL {url}: {e}"))?;
        let secure = matches!(info.addr, ConnectionAddr::TcpTls { .. });
        let any_tls = tls.ca_cert.is_some() || tls.cert.is_some() || tls.key.is_some();
        if any_tls && !secure {
            bail!("the TLS options need a rediss:// URL (got {url})");
        }
        if tls.cert.is_some() != tls.key.is_some() {
            bail!("--tls-cert and --tls-key go together");
        }
        if let Some(user) = user {
            if info.redis.username.is_some() {
                bail!("the user is given twice: in the URL and by --user");
            }
            info.redis.username = Some(user.to_string());
        }
        if info.redis.password.is_none() {
            if let Ok(password) = std::env::var("REDISCLI_AUTH") {
                info.redis.password = Some(password);
            } else if let Some(path) = password_file {
                let text = String::from_utf8(read(path, "password file")?)
                    .map_err(|_| anyhow!("the password file {} is not UTF-8", path.display()))?;
                let line = text.lines().next().unwrap_or_default().to_string();
                info.redis.password = Some(line);
            }
        } else if password_file.is_some() {
            bail!("the password is given twice: in the URL and by --password-file");
        }
        if secure {
            install_crypto();
            let client_tls = match (&tls.cert, &tls.key) {
                (Some(cert), Some(key)) => Some(ClientTlsConfig {
                    client_cert: read(cert, "client certificate")?,
                    client_key: read(key, "client key")?,
                }),
                _ => None,
            };
            let root_cert = tls
                .ca_cert
                .as_deref()
                .map(|p| read(p, "CA certificate"))
                .transpose()?;
            let client = redis::Client::build_with_tls(
                info,
                TlsCertificates {
                    client_tls,
                    root_cert,
                },
            )
            .map_err(|e| anyhow!("TLS set-up: {e}"))?;
            info = client.get_connection_info().clone();
        }
        Ok(Access {
            seed: info,
            timeout,
        })
    }

    /// An access to a node of tests and local runs: a plain `redis://` URL, the default
    /// timeout.
    pub fn plain(url: &str) -> Result<Access> {
        Access::new(url, None, None, &TlsFiles::default(), DEFAULT_TIMEOUT)
    }

    /// The ACL user the tool runs as (`default` when none is named).
    pub fn user(&self) -> &str {
        self.seed.redis.username.as_deref().unwrap_or("default")
    }

    /// The password the tool authenticates with, if any (what `MIGRATE ... AUTH2 user
    /// password` passes on to a target node).
    pub fn password(&self) -> Option<&str> {
        self.seed.redis.password.as_deref()
    }

    /// Whether the nodes are reached over TLS.
    pub fn tls(&self) -> bool {
        matches!(self.seed.addr, ConnectionAddr::TcpTls { .. })
    }

    /// The seed.
    pub fn seed(&self) -> Link {
        let address = match &self.seed.addr {
            ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
                format!("{host}:{port}")
            }
            ConnectionAddr::Unix(path) => path.display().to_string(),
        };
        Link {
            address,
            info: self.seed.clone(),
            timeout: self.timeout,
        }
    }

    /// The node at `address` (`host:port`), reached as the seed is (its credentials, TLS
    /// parameters and database). The certificate of a TLS node is checked against `host`, the
    /// name or address the cluster announces for it. Error: not a `host:port`.
    pub fn at(&self, address: &str) -> Result<Link> {
        let (host, port) = address
            .rsplit_once(':')
            .ok_or_else(|| anyhow!("not an ip:port address: {address}"))?;
        let port: u16 = port.parse().with_context(|| format!("port of {address}"))?;
        let mut info = self.seed.clone();
        info.addr = match &info.addr {
            ConnectionAddr::TcpTls {
                insecure,
                tls_params,
                ..
            } => ConnectionAddr::TcpTls {
                host: host.to_string(),
                port,
                insecure: *insecure,
                tls_params: tls_params.clone(),
            },
            _ => ConnectionAddr::Tcp(host.to_string(), port),
        };
        Ok(Link {
            address: address.to_string(),
            info,
            timeout: self.timeout,
        })
    }
}

/// The name of every connection the tool opens (`CLIENT SETNAME`), as `SLOWLOG` and `CLIENT
/// LIST` show it.
pub const CLIENT_NAME: &str = "ringslot";

/// The bound on every wait unless `--timeout` says otherwise: a node that does not answer a
/// plain read within it is stopped or far too busy to move slots.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

impl Link {
    /// The node's connection parameters, for [`Link::connect`].
    pub(crate) fn info(&self) -> &ConnectionInfo {
        &self.info
    }

    /// The bound on every wait of its connections.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// A client error as an operator reads it: a timeout says how long was waited.
    pub fn describe(&self, e: &redis::RedisError) -> String {
        let tls = matches!(self.info.addr, ConnectionAddr::TcpTls { .. });
        if e.is_timeout() {
            format!(
                "no answer within {} s (--timeout): the node is stopped, overloaded or \
                 unreachable{}",
                self.timeout.as_secs_f64(),
                if tls {
                    " (or, over TLS, the port is a plain-text one, which does not answer a \
                     TLS handshake: give the node's tls-port)"
                } else {
                    ""
                }
            )
        } else if e.kind() == redis::ErrorKind::AuthenticationFailed {
            format!(
                "cannot log in as `{}`: the password was refused or the user does not exist \
                 there (ACL users are per node: make the user on every node, with the same \
                 password) ({})",
                self.info.redis.username.as_deref().unwrap_or("default"),
                crate::client::error_text(e)
            )
        } else {
            crate::client::error_text(e)
        }
    }
}
