//! TLS on the broker's listeners and links, and the replication secret
//! (docs/tls.md): the settings as broker.conf names them, loaded once at
//! start into what each listener and dialer uses.

use std::sync::Arc;

use basalt_tls::{ClientSecurity, ClientTls, PeerSecret, ServerSecurity, ServerTls, TlsSettings};

use crate::broker::BrokerError;
use crate::config::ConfigError;

/// The `tls.*` properties and `replicationSecret`, as configured. Debug
/// output never shows the secret.
#[derive(Clone, Default)]
pub struct SecuritySettings {
    pub tls: TlsSettings,
    /// Basalt's `replicationSecret`: HA slaves and ledger members prove it
    /// (HMAC challenge-response, [`basalt_tls::peer_auth`]) before anything
    /// else on the HA and ledger ports. Empty: those ports are open to
    /// anyone who reaches them, as RocketMQ's are.
    pub replication_secret: String,
}

impl std::fmt::Debug for SecuritySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecuritySettings")
            .field("tls", &self.tls)
            .field(
                "replication_secret_set",
                &!self.replication_secret.is_empty(),
            )
            .finish()
    }
}

impl SecuritySettings {
    /// Applies one key if it is one of these; Ok(false) otherwise.
    pub fn set(&mut self, key: &str, v: &str) -> Result<bool, ConfigError> {
        if key == "replicationSecret" {
            self.replication_secret = v.trim().to_string();
            return Ok(true);
        }
        self.tls.set(key, v).map_err(|e| ConfigError::Invalid {
            key: key.to_string(),
            value: v.to_string(),
            reason: e.to_string(),
        })
    }
}

/// What the broker's listeners and dialers do with a new connection,
/// loaded from [`SecuritySettings`] once at start (certificate files are
/// re-read on change by [`ServerTls`]).
#[derive(Debug, Default)]
pub struct TransportSecurity {
    /// Every listener's TLS (None: disabled).
    pub server_tls: Option<Arc<ServerTls>>,
    /// The inner clients' TLS, when they dial with it.
    pub client_tls: Option<ClientTls>,
    pub secret: Option<PeerSecret>,
}

impl TransportSecurity {
    /// Reads `tls.config.file` and the certificate files (off the async
    /// workers). An error names the setting and file at fault.
    pub async fn load(s: &SecuritySettings) -> Result<TransportSecurity, BrokerError> {
        let s = s.clone();
        tokio::task::spawn_blocking(move || Self::load_blocking(&s))
            .await
            .map_err(|e| BrokerError::Other(format!("TLS load task: {e}")))?
    }

    pub fn load_blocking(s: &SecuritySettings) -> Result<TransportSecurity, BrokerError> {
        let tls = s
            .tls
            .clone()
            .with_config_file()
            .map_err(|e| BrokerError::Other(format!("TLS: {e}")))?;
        let server_tls =
            ServerTls::from_settings(&tls).map_err(|e| BrokerError::Other(format!("TLS: {e}")))?;
        let client_tls = if tls.inner_clients_use_tls() {
            Some(
                ClientTls::from_settings(&tls)
                    .map_err(|e| BrokerError::Other(format!("TLS: {e}")))?,
            )
        } else {
            None
        };
        if let Some(t) = &server_tls {
            tracing::info!(mode = t.mode().as_str(), cert = ?tls.server_cert_path, "TLS on the broker's listeners");
        }
        Ok(TransportSecurity {
            server_tls,
            client_tls,
            secret: PeerSecret::new(&s.replication_secret),
        })
    }

    fn server(&self, purpose: &'static str, secret: bool) -> Option<Arc<ServerSecurity>> {
        let sec = ServerSecurity {
            tls: self.server_tls.clone(),
            secret: if secret { self.secret.clone() } else { None },
            purpose,
        };
        (!sec.is_noop()).then(|| Arc::new(sec))
    }

    fn client(&self, purpose: &'static str, secret: bool) -> Option<Arc<ClientSecurity>> {
        let sec = ClientSecurity {
            tls: self.client_tls.clone(),
            secret: if secret { self.secret.clone() } else { None },
            purpose,
        };
        (sec.tls.is_some() || sec.secret.is_some()).then(|| Arc::new(sec))
    }

    /// The client port, metrics and dashboard: TLS only.
    pub fn listener(&self, purpose: &'static str) -> Option<Arc<ServerSecurity>> {
        self.server(purpose, false)
    }

    /// The HA and ledger ports: TLS and the replication secret.
    pub fn replication_listener(&self, purpose: &'static str) -> Option<Arc<ServerSecurity>> {
        self.server(purpose, true)
    }

    /// Registration with the NameServers.
    pub fn inner_client(&self, purpose: &'static str) -> Option<Arc<ClientSecurity>> {
        self.client(purpose, false)
    }

    /// The HA slave's and ledger members' links.
    pub fn replication_client(&self, purpose: &'static str) -> Option<Arc<ClientSecurity>> {
        self.client(purpose, true)
    }
}
