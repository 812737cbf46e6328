//! [`TlsError`]: why a TLS setting, file or handshake was refused.

use std::path::PathBuf;

/// Errors of configuration, certificate loading and connection set-up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A `tls.*` property has a value it cannot take.
    #[error("{key}: invalid value {value:?} ({expected})")]
    Setting {
        key: String,
        value: String,
        expected: &'static str,
    },
    /// A file named by a setting cannot be read.
    #[error("{what} {path}: {source}")]
    File {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    /// A PEM file holds nothing usable.
    #[error("{what} {path}: {reason}")]
    Pem {
        what: &'static str,
        path: PathBuf,
        reason: String,
    },
    /// A setting needed by the chosen mode is missing.
    #[error("{0}")]
    Missing(String),
    /// rustls refused the certificate, key or trust store.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// The client-certificate verifier could not be built.
    #[error("client certificate verifier: {0}")]
    Verifier(String),
}
