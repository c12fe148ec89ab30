//! The harness's error: why a server, a cluster or a proxy could not be started or did not
//! answer as expected, in words (quoting the server's log where there is one).

use std::fmt;

/// Why a server could not be started, or a cluster did not converge; the text quotes the
/// server's log where there is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error(pub String);

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Error {}
