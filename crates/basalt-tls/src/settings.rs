//! [`TlsSettings`]: RocketMQ's TLS properties, by their Java names.

use std::path::{Path, PathBuf};

use crate::error::TlsError;

/// `tls.server.mode`: what a listener does with TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain text only; a TLS ClientHello is closed.
    Disabled,
    /// TLS and plain text on one port, told apart by the first byte.
    Permissive,
    /// TLS only; a plain-text connection is closed.
    Enforcing,
}

impl TlsMode {
    pub fn parse(s: &str) -> Option<TlsMode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "disabled" => Some(TlsMode::Disabled),
            "permissive" => Some(TlsMode::Permissive),
            "enforcing" => Some(TlsMode::Enforcing),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::Permissive => "permissive",
            TlsMode::Enforcing => "enforcing",
        }
    }
}

/// `tls.server.need.client.auth`: whether a client must show a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuthMode {
    #[default]
    None,
    Optional,
    Require,
}

impl ClientAuthMode {
    pub fn parse(s: &str) -> Option<ClientAuthMode> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" => Some(ClientAuthMode::None),
            "optional" => Some(ClientAuthMode::Optional),
            "require" => Some(ClientAuthMode::Require),
            _ => None,
        }
    }
}

/// Every TLS property Basalt reads, named as RocketMQ's `TlsSystemConfig`
/// names them. Defaults follow Java's except `tls.server.mode`: Java
/// defaults to permissive with a generated self-signed certificate; Basalt
/// generates none, so with no mode set it is permissive when a certificate
/// is configured and disabled otherwise ([`TlsSettings::server_mode`]).
/// Debug output never shows a key password.
#[derive(Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// `tls.server.mode`, when set.
    pub server_mode: Option<TlsMode>,
    /// `tls.server.certPath`: the certificate chain, PEM.
    pub server_cert_path: Option<PathBuf>,
    /// `tls.server.keyPath`: the private key, PEM (PKCS#8, PKCS#1 or SEC1).
    pub server_key_path: Option<PathBuf>,
    /// `tls.server.keyPassword`: encrypted keys are not supported; a set
    /// password is refused with a message saying how to decrypt the key.
    pub server_key_password: Option<String>,
    /// `tls.server.need.client.auth`.
    pub server_need_client_auth: ClientAuthMode,
    /// `tls.server.authClient`: verify a client's certificate against
    /// `tls.server.trustCertPath` (otherwise any certificate is taken).
    pub server_auth_client: bool,
    /// `tls.server.trustCertPath`: CA certificates for client certificates.
    pub server_trust_cert_path: Option<PathBuf>,
    /// `tls.enable`: inner clients (and Java's clients) connect with TLS.
    pub client_enable: bool,
    /// `tls.client.authServer`: verify the server's certificate.
    pub client_auth_server: bool,
    /// `tls.client.trustCertPath`: CA certificates for server certificates.
    pub client_trust_cert_path: Option<PathBuf>,
    /// `tls.client.certPath`: a client certificate to show, PEM.
    pub client_cert_path: Option<PathBuf>,
    /// `tls.client.keyPath`: its key, PEM.
    pub client_key_path: Option<PathBuf>,
    /// `tls.client.keyPassword`: refused like the server's.
    pub client_key_password: Option<String>,
    /// `tls.test.mode.enable` (Java default true): clients trust any
    /// server certificate, whatever `tls.client.authServer` says.
    pub test_mode_enable: bool,
    /// `tls.config.file`: a properties file with more of these settings.
    pub config_file: Option<PathBuf>,
}

impl Default for TlsSettings {
    fn default() -> Self {
        Self {
            server_mode: None,
            server_cert_path: None,
            server_key_path: None,
            server_key_password: None,
            server_need_client_auth: ClientAuthMode::None,
            server_auth_client: false,
            server_trust_cert_path: None,
            client_enable: false,
            client_auth_server: false,
            client_trust_cert_path: None,
            client_cert_path: None,
            client_key_path: None,
            client_key_password: None,
            test_mode_enable: true,
            config_file: None,
        }
    }
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("server_mode", &self.server_mode)
            .field("server_cert_path", &self.server_cert_path)
            .field("server_key_path", &self.server_key_path)
            .field(
                "server_key_password_set",
                &self.server_key_password.is_some(),
            )
            .field("server_need_client_auth", &self.server_need_client_auth)
            .field("server_auth_client", &self.server_auth_client)
            .field("server_trust_cert_path", &self.server_trust_cert_path)
            .field("client_enable", &self.client_enable)
            .field("client_auth_server", &self.client_auth_server)
            .field("client_trust_cert_path", &self.client_trust_cert_path)
            .field("client_cert_path", &self.client_cert_path)
            .field("client_key_path", &self.client_key_path)
            .field(
                "client_key_password_set",
                &self.client_key_password.is_some(),
            )
            .field("test_mode_enable", &self.test_mode_enable)
            .field("config_file", &self.config_file)
            .finish()
    }
}

fn path(v: &str) -> Option<PathBuf> {
    let v = v.trim();
    (!v.is_empty()).then(|| PathBuf::from(v))
}

fn text(v: &str) -> Option<String> {
    let v = v.trim();
    (!v.is_empty()).then(|| v.to_string())
}

fn flag(key: &str, v: &str) -> Result<bool, TlsError> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(TlsError::Setting {
            key: key.into(),
            value: v.into(),
            expected: "true or false",
        }),
    }
}

impl TlsSettings {
    /// Whether `key` is one of the TLS properties.
    pub fn is_tls_key(key: &str) -> bool {
        key.starts_with("tls.")
    }

    /// Sets one property. Returns false for a key that is not a TLS
    /// property (the caller's to handle).
    pub fn set(&mut self, key: &str, v: &str) -> Result<bool, TlsError> {
        match key {
            "tls.server.mode" => {
                self.server_mode = Some(TlsMode::parse(v).ok_or_else(|| TlsError::Setting {
                    key: key.into(),
                    value: v.into(),
                    expected: "disabled, permissive or enforcing",
                })?)
            }
            "tls.server.certPath" => self.server_cert_path = path(v),
            "tls.server.keyPath" => self.server_key_path = path(v),
            "tls.server.keyPassword" => self.server_key_password = text(v),
            "tls.server.need.client.auth" => {
                self.server_need_client_auth =
                    ClientAuthMode::parse(v).ok_or_else(|| TlsError::Setting {
                        key: key.into(),
                        value: v.into(),
                        expected: "none, optional or require",
                    })?
            }
            "tls.server.authClient" => self.server_auth_client = flag(key, v)?,
            "tls.server.trustCertPath" => self.server_trust_cert_path = path(v),
            "tls.enable" => self.client_enable = flag(key, v)?,
            "tls.client.authServer" => self.client_auth_server = flag(key, v)?,
            "tls.client.trustCertPath" => self.client_trust_cert_path = path(v),
            "tls.client.certPath" => self.client_cert_path = path(v),
            "tls.client.keyPath" => self.client_key_path = path(v),
            "tls.client.keyPassword" => self.client_key_password = text(v),
            "tls.test.mode.enable" => self.test_mode_enable = flag(key, v)?,
            "tls.config.file" => self.config_file = path(v),
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Reads `tls.config.file` (Java properties: `key=value` or `key: value`
    /// lines, `#` and `!` comments) if one is set. Settings given directly
    /// win over the file's, as Java's system properties do.
    pub fn with_config_file(self) -> Result<TlsSettings, TlsError> {
        let Some(file) = self.config_file.clone() else {
            return Ok(self);
        };
        let text = std::fs::read_to_string(&file).map_err(|source| TlsError::File {
            what: "tls.config.file",
            path: file.clone(),
            source,
        })?;
        let mut merged = TlsSettings::default();
        for (k, v) in parse_properties(&text) {
            merged.set(&k, &v)?;
        }
        merged.overlay(&self);
        merged.config_file = Some(file);
        Ok(merged)
    }

    /// Copies every setting of `over` that differs from the default.
    fn overlay(&mut self, over: &TlsSettings) {
        let d = TlsSettings::default();
        macro_rules! take {
            ($($f:ident),*) => {$( if over.$f != d.$f { self.$f = over.$f.clone(); } )*};
        }
        take!(
            server_mode,
            server_cert_path,
            server_key_path,
            server_key_password,
            server_need_client_auth,
            server_auth_client,
            server_trust_cert_path,
            client_enable,
            client_auth_server,
            client_trust_cert_path,
            client_cert_path,
            client_key_path,
            client_key_password,
            test_mode_enable
        );
    }

    /// The listener mode in force: `tls.server.mode` if set, else
    /// permissive when a certificate is configured, disabled otherwise.
    pub fn server_mode(&self) -> TlsMode {
        self.server_mode
            .unwrap_or(if self.server_cert_path.is_some() {
                TlsMode::Permissive
            } else {
                TlsMode::Disabled
            })
    }

    /// Whether the broker's inner clients (HA slave, ledger peers, the
    /// registration to NameServers) dial with TLS: `tls.enable`, or a
    /// listener mode of enforcing (its peers then speak TLS only).
    pub fn inner_clients_use_tls(&self) -> bool {
        self.client_enable || self.server_mode() == TlsMode::Enforcing
    }
}

/// `key=value` pairs of a Java properties text (no line continuations).
pub(crate) fn parse_properties(text: &str) -> Vec<(String, String)> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('!'))
        .filter_map(|l| {
            let at = l.find(['=', ':'])?;
            Some((l[..at].trim().to_string(), l[at + 1..].trim().to_string()))
        })
        .collect()
}

/// The paths a server config is built from, for change detection.
pub(crate) fn server_files(s: &TlsSettings) -> Vec<&Path> {
    [
        &s.server_cert_path,
        &s.server_key_path,
        &s.server_trust_cert_path,
    ]
    .into_iter()
    .flatten()
    .map(PathBuf::as_path)
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn properties_by_java_names() {
        let mut s = TlsSettings::default();
        assert!(s.set("tls.server.mode", "Enforcing").unwrap());
        assert!(s.set("tls.server.need.client.auth", "require").unwrap());
        assert!(s.set("tls.test.mode.enable", "false").unwrap());
        assert!(!s.set("brokerName", "a").unwrap());
        assert!(s.set("tls.server.mode", "strict").is_err());
        assert_eq!(s.server_mode(), TlsMode::Enforcing);
        assert_eq!(s.server_need_client_auth, ClientAuthMode::Require);
        assert!(!s.test_mode_enable);
    }

    #[test]
    fn mode_defaults_to_permissive_only_with_a_certificate() {
        let mut s = TlsSettings::default();
        assert_eq!(s.server_mode(), TlsMode::Disabled);
        s.set("tls.server.certPath", "/x.pem").unwrap();
        assert_eq!(s.server_mode(), TlsMode::Permissive);
    }

    #[test]
    fn the_config_file_fills_what_was_not_set_directly() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("tls.properties");
        std::fs::write(
            &f,
            "# comment\ntls.server.mode=enforcing\ntls.server.certPath = /a.pem\ntls.enable: true\n",
        )
        .unwrap();
        let mut s = TlsSettings::default();
        s.set("tls.config.file", f.to_str().unwrap()).unwrap();
        s.set("tls.server.certPath", "/b.pem").unwrap();
        let s = s.with_config_file().unwrap();
        assert_eq!(s.server_mode(), TlsMode::Enforcing);
        assert_eq!(s.server_cert_path.as_deref(), Some(Path::new("/b.pem")));
        assert!(s.client_enable);
    }
}
