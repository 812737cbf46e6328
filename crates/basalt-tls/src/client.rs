//! [`ClientTls`]: the dialing side of TLS.

use std::sync::Arc;

use rustls::pki_types::ServerName;

use crate::error::TlsError;
use crate::server::{read_certs, read_key, read_roots};
use crate::settings::TlsSettings;
use crate::verify::AcceptAnyCert;

/// A rustls client config built from the `tls.client.*` settings. Trust as
/// Java's `TlsHelper` decides it: with `tls.test.mode.enable` (Java's
/// default) or without `tls.client.authServer` any server certificate is
/// taken; otherwise it must chain to `tls.client.trustCertPath` and name
/// the host dialed.
#[derive(Debug, Clone)]
pub struct ClientTls {
    config: Arc<rustls::ClientConfig>,
}

impl ClientTls {
    pub fn from_settings(s: &TlsSettings) -> Result<ClientTls, TlsError> {
        let builder = rustls::ClientConfig::builder_with_provider(crate::provider())
            .with_safe_default_protocol_versions()?;
        let builder = if s.test_mode_enable || !s.client_auth_server {
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCert::new(false)))
        } else {
            let Some(trust) = &s.client_trust_cert_path else {
                return Err(TlsError::Missing(
                    "tls.client.authServer=true needs tls.client.trustCertPath".into(),
                ));
            };
            builder.with_root_certificates(read_roots("tls.client.trustCertPath", trust)?)
        };
        let config = match (&s.client_cert_path, &s.client_key_path) {
            (Some(cert), Some(key)) => builder.with_client_auth_cert(
                read_certs("tls.client.certPath", cert)?,
                read_key("tls.client.keyPath", key, s.client_key_password.as_deref())?,
            )?,
            _ => builder.with_no_client_auth(),
        };
        Ok(ClientTls {
            config: Arc::new(config),
        })
    }

    /// Trusts exactly the CA certificates of `ca_pem` (the CLI's `--tls-ca`).
    pub fn with_ca_file(ca_pem: &std::path::Path) -> Result<ClientTls, TlsError> {
        let s = TlsSettings {
            test_mode_enable: false,
            client_auth_server: true,
            client_trust_cert_path: Some(ca_pem.to_path_buf()),
            ..TlsSettings::default()
        };
        Self::from_settings(&s)
    }

    /// Takes any server certificate (the CLI's `--tls` without `--tls-ca`).
    pub fn insecure() -> ClientTls {
        Self::from_settings(&TlsSettings::default()).expect("a config without files always builds")
    }

    pub(crate) fn connector(&self) -> tokio_rustls::TlsConnector {
        tokio_rustls::TlsConnector::from(Arc::clone(&self.config))
    }
}

/// The name a server certificate is checked against: the host of
/// `host:port` (an IP address as such).
pub(crate) fn server_name(addr: &str) -> ServerName<'static> {
    let host = match addr.rsplit_once(':') {
        Some((h, _)) => h,
        None => addr,
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string())
        .unwrap_or_else(|_| ServerName::try_from("localhost").expect("a valid DNS name"))
}
