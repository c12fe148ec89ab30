//! TLS for test servers: a throw-away CA, a server certificate for `127.0.0.1` and
//! `localhost`, and a client certificate, made with rcgen in a temporary directory (PEM
//! files, as redis-server and redis-cli take them).

use crate::error::Error;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose, SanType,
};
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;

/// The PEM files of a test CA, a server certificate and a client certificate.
#[derive(Debug)]
pub struct Certificates {
    _dir: tempfile::TempDir,
    /// The CA's certificate.
    pub ca: PathBuf,
    /// The servers' certificate (for `127.0.0.1` and `localhost`) and key.
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    /// A client certificate and key, signed by the CA.
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

fn fail(e: impl std::fmt::Display) -> Error {
    Error(format!("test certificates: {e}"))
}

impl Certificates {
    /// Makes the CA and the two certificates. Error: a file that cannot be written.
    pub fn make() -> Result<Arc<Certificates>, Error> {
        let dir = tempfile::tempdir().map_err(fail)?;
        let ca_key = KeyPair::generate().map_err(fail)?;
        // Each certificate its own subject: a leaf with its issuer's name passes for
        // self-signed, and OpenSSL refuses it.
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(fail)?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "ringslot test CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = ca_params.self_signed(&ca_key).map_err(fail)?;
        let leaf = |names: Vec<String>| -> Result<(String, String), Error> {
            let key = KeyPair::generate().map_err(fail)?;
            let name = names.first().cloned().unwrap_or_default();
            let mut params = CertificateParams::new(names).map_err(fail)?;
            params.distinguished_name.push(DnType::CommonName, name);
            params.extended_key_usages = vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ];
            params
                .subject_alt_names
                .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
            let cert = params.signed_by(&key, &ca, &ca_key).map_err(fail)?;
            Ok((cert.pem(), key.serialize_pem()))
        };
        let (server_cert, server_key) = leaf(vec!["localhost".into()])?;
        let (client_cert, client_key) = leaf(vec!["ringslot-test-client".into()])?;
        let write = |name: &str, text: &str| -> Result<PathBuf, Error> {
            let path = dir.path().join(name);
            std::fs::write(&path, text).map_err(fail)?;
            Ok(path)
        };
        Ok(Arc::new(Certificates {
            ca: write("ca.crt", &ca.pem())?,
            server_cert: write("server.crt", &server_cert)?,
            server_key: write("server.key", &server_key)?,
            client_cert: write("client.crt", &client_cert)?,
            client_key: write("client.key", &client_key)?,
            _dir: dir,
        }))
    }

    /// redis-server's arguments for a TLS-only server on `port` (`--port 0`), clients asked
    /// for a certificate, the cluster bus and replication over TLS too.
    pub fn server_args(&self, port: u16) -> Vec<String> {
        let p = |p: &PathBuf| p.display().to_string();
        [
            "--port".to_string(),
            "0".into(),
            "--tls-port".into(),
            port.to_string(),
            "--tls-cert-file".into(),
            p(&self.server_cert),
            "--tls-key-file".into(),
            p(&self.server_key),
            "--tls-ca-cert-file".into(),
            p(&self.ca),
            "--tls-auth-clients".into(),
            "yes".into(),
            "--tls-replication".into(),
            "yes".into(),
        ]
        .into()
    }

    /// redis-cli's arguments to reach such a server.
    pub fn cli_args(&self) -> Vec<String> {
        let p = |p: &PathBuf| p.display().to_string();
        vec![
            "--tls".into(),
            "--cacert".into(),
            p(&self.ca),
            "--cert".into(),
            p(&self.client_cert),
            "--key".into(),
            p(&self.client_key),
        ]
    }

    /// The redis crate's TLS set-up for such a server.
    pub fn client_certificates(&self) -> Result<redis::TlsCertificates, Error> {
        let read = |p: &PathBuf| std::fs::read(p).map_err(fail);
        Ok(redis::TlsCertificates {
            client_tls: Some(redis::ClientTlsConfig {
                client_cert: read(&self.client_cert)?,
                client_key: read(&self.client_key)?,
            }),
            root_cert: Some(read(&self.ca)?),
        })
    }
}
