//! [`ServerTls`]: the listener's rustls config, rebuilt when its files change.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::Mutex;
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

use crate::error::TlsError;
use crate::settings::{ClientAuthMode, TlsMode, TlsSettings, server_files};
use crate::verify::AcceptAnyCert;

/// How often at most the files are looked at for a change (on accept).
const RELOAD_CHECK_INTERVAL: Duration = Duration::from_secs(1);

/// The server side of TLS for one or more listeners. Owns the current
/// rustls config; a connection accepted after a certificate, key or trust
/// file changed gets a config built from the new files, while connections
/// already open keep the one they started with. A change that does not load
/// (a half-written file, a key that does not match) is logged and the
/// previous config stays in force.
pub struct ServerTls {
    settings: TlsSettings,
    mode: TlsMode,
    extra: Extra,
    current: Mutex<Arc<rustls::ServerConfig>>,
    watch: Mutex<Watch>,
}

/// What a listener adds to the settings: the ALPN protocols it offers and,
/// when no certificate is configured, a self-signed one made up at start.
#[derive(Default)]
struct Extra {
    alpn: Vec<Vec<u8>>,
    self_signed: Option<(CertificateDer<'static>, PrivateKeyDer<'static>)>,
}

/// The files' modification times as of the config in force.
struct Watch {
    last_check: Instant,
    stamps: Vec<Option<SystemTime>>,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls")
            .field("mode", &self.mode)
            .field("cert", &self.settings.server_cert_path)
            .finish()
    }
}

impl ServerTls {
    /// Loads the certificate and key the settings name. None when the mode
    /// in force is disabled.
    pub fn from_settings(settings: &TlsSettings) -> Result<Option<Arc<ServerTls>>, TlsError> {
        let mode = settings.server_mode();
        if mode == TlsMode::Disabled {
            return Ok(None);
        }
        Self::build(settings, mode, Extra::default()).map(Some)
    }

    /// TLS for the gRPC port, as RocketMQ's proxy serves it: the mode is
    /// `tls.server.mode` when set and permissive otherwise (the 5.x SDKs
    /// dial with TLS by default); ALPN offers `h2` only; with no
    /// `tls.server.certPath` a self-signed certificate for `localhost` and
    /// 127.0.0.1 is made up (the proxy's `tlsTestModeEnable`; the SDKs do
    /// not check the server certificate). None when the mode is disabled.
    pub fn for_grpc(settings: &TlsSettings) -> Result<Option<Arc<ServerTls>>, TlsError> {
        let mode = settings.server_mode.unwrap_or(TlsMode::Permissive);
        if mode == TlsMode::Disabled {
            return Ok(None);
        }
        let self_signed = match &settings.server_cert_path {
            Some(_) => None,
            None => Some(self_signed()?),
        };
        let extra = Extra {
            alpn: vec![b"h2".to_vec()],
            self_signed,
        };
        Self::build(settings, mode, extra).map(Some)
    }

    /// Whether the certificate in use was made up at start.
    pub fn is_self_signed(&self) -> bool {
        self.extra.self_signed.is_some()
    }

    fn build(settings: &TlsSettings, mode: TlsMode, extra: Extra) -> Result<Arc<Self>, TlsError> {
        let config = build_server_config(settings, &extra)?;
        let stamps = stamps_blocking(&server_files(settings));
        Ok(Arc::new(ServerTls {
            settings: settings.clone(),
            mode,
            extra,
            current: Mutex::new(config),
            watch: Mutex::new(Watch {
                last_check: Instant::now(),
                stamps,
            }),
        }))
    }

    pub fn mode(&self) -> TlsMode {
        self.mode
    }

    /// The config for a new connection: the files are looked at (at most
    /// once a second) and the config rebuilt if one of them changed.
    pub async fn config(&self) -> Arc<rustls::ServerConfig> {
        let due = {
            let mut w = self.watch.lock();
            let due = w.last_check.elapsed() >= RELOAD_CHECK_INTERVAL;
            if due {
                w.last_check = Instant::now();
            }
            due
        };
        if due {
            self.reload_if_changed().await;
        }
        self.current.lock().clone()
    }

    async fn reload_if_changed(&self) {
        let files: Vec<PathBuf> = server_files(&self.settings)
            .into_iter()
            .map(Path::to_path_buf)
            .collect();
        let mut now = Vec::with_capacity(files.len());
        for f in &files {
            now.push(tokio::fs::metadata(f).await.and_then(|m| m.modified()).ok());
        }
        if self.watch.lock().stamps == now {
            return;
        }
        let settings = self.settings.clone();
        let extra = Extra {
            alpn: self.extra.alpn.clone(),
            self_signed: (self.extra.self_signed.as_ref()).map(|(c, k)| (c.clone(), k.clone_key())),
        };
        let built =
            tokio::task::spawn_blocking(move || build_server_config(&settings, &extra)).await;
        match built {
            Ok(Ok(config)) => {
                *self.current.lock() = config;
                self.watch.lock().stamps = now;
                tracing::info!(cert = ?self.settings.server_cert_path,
                    "TLS certificate files changed: new connections use the reloaded config");
            }
            Ok(Err(e)) => {
                // Keep the old stamps: the next accept tries again.
                tracing::warn!(error = %e, "TLS files changed but do not load; keeping the previous config");
            }
            Err(e) => tracing::warn!(error = %e, "TLS reload task failed"),
        }
    }
}

fn stamps_blocking(files: &[&Path]) -> Vec<Option<SystemTime>> {
    files
        .iter()
        .map(|f| std::fs::metadata(f).and_then(|m| m.modified()).ok())
        .collect()
}

/// Reads every certificate of a PEM file.
pub(crate) fn read_certs(
    what: &'static str,
    path: &Path,
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bytes = std::fs::read(path).map_err(|source| TlsError::File {
        what,
        path: path.to_path_buf(),
        source,
    })?;
    let certs: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&bytes).collect();
    let certs = certs.map_err(|e| TlsError::Pem {
        what,
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            what,
            path: path.to_path_buf(),
            reason: "no CERTIFICATE block".into(),
        });
    }
    Ok(certs)
}

/// Reads the private key of a PEM file (PKCS#8, PKCS#1 or SEC1). A set
/// password is refused: rustls reads unencrypted keys only.
pub(crate) fn read_key(
    what: &'static str,
    path: &Path,
    password: Option<&str>,
) -> Result<PrivateKeyDer<'static>, TlsError> {
    if password.is_some() {
        return Err(TlsError::Missing(format!(
            "{what} {}: encrypted private keys (keyPassword) are not supported; \
             decrypt it with `openssl pkcs8 -topk8 -nocrypt` and drop the password setting",
            path.display()
        )));
    }
    let bytes = std::fs::read(path).map_err(|source| TlsError::File {
        what,
        path: path.to_path_buf(),
        source,
    })?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| TlsError::Pem {
        what,
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// A root store of every certificate in a PEM file.
pub(crate) fn read_roots(what: &'static str, path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for c in read_certs(what, path)? {
        roots.add(c)?;
    }
    Ok(roots)
}

/// A self-signed certificate for `localhost` and 127.0.0.1 (ECDSA P-256),
/// made up in memory; the key never touches the disk.
fn self_signed() -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), TlsError> {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .map_err(|e| TlsError::Missing(format!("self-signed certificate: {e}")))?;
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(made.signing_key.serialize_der());
    Ok((made.cert.der().clone(), PrivateKeyDer::Pkcs8(key)))
}

fn build_server_config(
    s: &TlsSettings,
    extra: &Extra,
) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let (chain, key) = match (&s.server_cert_path, &s.server_key_path, &extra.self_signed) {
        (Some(cert), Some(key), _) => (
            read_certs("tls.server.certPath", cert)?,
            read_key("tls.server.keyPath", key, s.server_key_password.as_deref())?,
        ),
        (None, _, Some((cert, key))) => (vec![cert.clone()], key.clone_key()),
        _ => {
            return Err(TlsError::Missing(format!(
                "tls.server.mode={} needs tls.server.certPath and tls.server.keyPath",
                s.server_mode().as_str()
            )));
        }
    };
    let builder = rustls::ServerConfig::builder_with_provider(crate::provider())
        .with_safe_default_protocol_versions()?;
    let mandatory = s.server_need_client_auth == ClientAuthMode::Require;
    let builder = match s.server_need_client_auth {
        ClientAuthMode::None => builder.with_no_client_auth(),
        _ => match (&s.server_trust_cert_path, s.server_auth_client) {
            (Some(trust), true) => {
                let roots = Arc::new(read_roots("tls.server.trustCertPath", trust)?);
                let v = WebPkiClientVerifier::builder_with_provider(roots, crate::provider());
                let v = if mandatory {
                    v
                } else {
                    v.allow_unauthenticated()
                };
                builder.with_client_cert_verifier(
                    v.build().map_err(|e| TlsError::Verifier(e.to_string()))?,
                )
            }
            (None, true) => {
                return Err(TlsError::Missing(
                    "tls.server.authClient=true needs tls.server.trustCertPath".into(),
                ));
            }
            (_, false) => {
                builder.with_client_cert_verifier(Arc::new(AcceptAnyCert::new(mandatory)))
            }
        },
    };
    let mut config = builder.with_single_cert(chain, key)?;
    config.alpn_protocols = extra.alpn.clone();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn grpc_defaults_to_permissive_with_a_made_up_certificate_and_h2() {
        let tls = ServerTls::for_grpc(&TlsSettings::default())
            .expect("loads")
            .expect("not disabled");
        assert_eq!(tls.mode(), TlsMode::Permissive);
        assert!(tls.is_self_signed());
        let config = tls.config().await;
        assert_eq!(config.alpn_protocols, vec![b"h2".to_vec()]);
        // The other listeners keep their rule: no certificate, no TLS.
        assert!(
            ServerTls::from_settings(&TlsSettings::default())
                .expect("loads")
                .is_none()
        );
    }

    #[test]
    fn grpc_follows_an_explicit_mode() {
        let mut s = TlsSettings {
            server_mode: Some(TlsMode::Disabled),
            ..TlsSettings::default()
        };
        assert!(ServerTls::for_grpc(&s).expect("loads").is_none());
        s.server_mode = Some(TlsMode::Enforcing);
        let tls = ServerTls::for_grpc(&s).expect("loads").expect("on");
        assert_eq!(tls.mode(), TlsMode::Enforcing);
        // A configured certificate that cannot be read is an error, never
        // silently replaced by a made-up one.
        s.server_cert_path = Some("/nonexistent/cert.pem".into());
        s.server_key_path = Some("/nonexistent/key.pem".into());
        assert!(ServerTls::for_grpc(&s).is_err());
    }
}
