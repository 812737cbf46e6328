//! [`ClientConfig`]: what every producer, consumer and admin client shares.

use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use basalt_remoting::{LanguageCode, SerializeType};

/// Settings of a [`crate::ClientInstance`] (Java `ClientConfig`).
///
/// Defaults follow the Java client: 3 s request timeout, heartbeats and
/// route polls every 30 s, consumer offsets persisted every 5 s, rebalance
/// every 20 s.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// NameServer addresses, `host:port` separated by `;`.
    pub namesrv_addr: String,
    /// The IP in this client's id. `None`: the local address that routes to
    /// the first NameServer (127.0.0.1 if that cannot be found).
    pub client_ip: Option<String>,
    /// Instance name in the client id `ip@instance`. `"DEFAULT"` is replaced
    /// by `pid#nanos`, so two clients in one process get different ids
    /// (as Java's `changeInstanceNameToPID`).
    pub instance_name: String,
    /// Timeout of ordinary requests (routes, offsets, heartbeats…).
    pub request_timeout: Duration,
    /// Period of HEART_BEAT to every known broker.
    pub heartbeat_interval: Duration,
    /// Period of route refreshes for every topic in use.
    pub poll_name_server_interval: Duration,
    /// Period of consumer offset commits (UPDATE_CONSUMER_OFFSET).
    pub persist_consumer_offset_interval: Duration,
    /// Period of push-consumer rebalancing (also run on
    /// NOTIFY_CONSUMER_IDS_CHANGED).
    pub rebalance_interval: Duration,
    /// Language reported in request headers.
    pub language: LanguageCode,
    /// `MQVersion` ordinal reported in request headers (401 = V4_9_4, so
    /// NameServers answer with standard JSON).
    pub version: i32,
    /// Header encoding of requests. Default: the binary ROCKETMQ layout,
    /// which every RocketMQ broker since 4.0 (and Basalt) decodes and which
    /// costs both sides less than JSON; `Json` is what Java clients send.
    /// Responses are decoded in whichever form they come.
    pub serialize_type: SerializeType,
    /// Upper bound for opening a connection.
    pub connect_timeout: Duration,
    /// TLS to NameServers and brokers (Java's `useTLS`); None: plain TCP.
    pub tls: Option<basalt_remoting::ClientTls>,
    /// Every request is signed with these (Java's `AclClientRPCHook`,
    /// docs/auth.md); None: unsigned.
    pub credentials: Option<Credentials>,
}

/// An access key and its secret, for signing requests. The secret never
/// shows in `Debug` output.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub access_key: String,
    pub secret_key: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .field("secret_key", &"<redacted>")
            .finish()
    }
}

/// The process-wide credentials default, as [`set_default_tls`] for TLS.
static DEFAULT_CREDENTIALS: std::sync::OnceLock<Credentials> = std::sync::OnceLock::new();

/// Makes every [`ClientConfig`] created afterwards sign its requests with
/// `credentials`. Only the first call counts.
pub fn set_default_credentials(credentials: Credentials) {
    let _ = DEFAULT_CREDENTIALS.set(credentials);
}

/// The process-wide TLS default (Java's `-Dtls.enable=true`): set once,
/// e.g. by the CLI's `--tls`, it is every later [`ClientConfig`]'s `tls`.
static DEFAULT_TLS: std::sync::OnceLock<basalt_remoting::ClientTls> = std::sync::OnceLock::new();

/// Makes every [`ClientConfig`] created afterwards connect with `tls`.
/// Only the first call counts.
pub fn set_default_tls(tls: basalt_remoting::ClientTls) {
    let _ = DEFAULT_TLS.set(tls);
}

impl Default for ClientConfig {
    fn default() -> Self {
        Self {
            namesrv_addr: "127.0.0.1:9876".into(),
            client_ip: None,
            instance_name: "DEFAULT".into(),
            request_timeout: Duration::from_secs(3),
            heartbeat_interval: Duration::from_secs(30),
            poll_name_server_interval: Duration::from_secs(30),
            persist_consumer_offset_interval: Duration::from_secs(5),
            rebalance_interval: Duration::from_secs(20),
            language: LanguageCode::Java,
            version: basalt_common::constants::MQ_VERSION,
            serialize_type: SerializeType::Rocketmq,
            connect_timeout: Duration::from_secs(3),
            tls: DEFAULT_TLS.get().cloned(),
            credentials: DEFAULT_CREDENTIALS.get().cloned(),
        }
    }
}

impl ClientConfig {
    /// Defaults with the given NameServer list (`;`-separated).
    pub fn new(namesrv_addr: impl Into<String>) -> Self {
        Self {
            namesrv_addr: namesrv_addr.into(),
            ..Self::default()
        }
    }

    /// The NameServer addresses, trimmed, empty entries dropped.
    pub fn namesrv_list(&self) -> Vec<String> {
        self.namesrv_addr
            .split(';')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    }

    /// The IP to report: the configured one, or the local address that
    /// routes to the first NameServer, or 127.0.0.1.
    pub fn resolve_client_ip(&self) -> String {
        if let Some(ip) = &self.client_ip {
            return ip.clone();
        }
        self.namesrv_list()
            .first()
            .and_then(|ns| local_ip_towards(ns))
            .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
            .to_string()
    }

    /// The instance name with `"DEFAULT"` replaced by a per-instance value.
    pub fn resolve_instance_name(&self) -> String {
        if self.instance_name == "DEFAULT" {
            static SEQ: AtomicU64 = AtomicU64::new(0);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(0);
            let seq = SEQ.fetch_add(1, Ordering::Relaxed);
            format!("{}#{}", std::process::id(), nanos.wrapping_add(seq))
        } else {
            self.instance_name.clone()
        }
    }
}

/// The local IP a packet to `addr` would leave from. Connecting a UDP socket
/// only consults the routing table; nothing is sent.
fn local_ip_towards(addr: &str) -> Option<IpAddr> {
    let target = addr.to_socket_addrs().ok()?.next()?;
    let bind = if target.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    };
    let sock = UdpSocket::bind(bind).ok()?;
    sock.connect(target).ok()?;
    let ip = sock.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then_some(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn namesrv_list_splits_and_trims() {
        let c = ClientConfig::new(" 10.0.0.1:9876; ;10.0.0.2:9876;");
        assert_eq!(c.namesrv_list(), vec!["10.0.0.1:9876", "10.0.0.2:9876"]);
    }

    #[test]
    fn loopback_namesrv_gives_loopback_ip() {
        let c = ClientConfig::new("127.0.0.1:9876");
        assert_eq!(c.resolve_client_ip(), "127.0.0.1");
        let c = ClientConfig {
            client_ip: Some("10.1.2.3".into()),
            ..c
        };
        assert_eq!(c.resolve_client_ip(), "10.1.2.3");
    }

    #[test]
    fn default_instance_names_differ() {
        let c = ClientConfig::default();
        let a = c.resolve_instance_name();
        let b = c.resolve_instance_name();
        assert_ne!(a, b);
        assert!(a.starts_with(&format!("{}#", std::process::id())));
        let named = ClientConfig {
            instance_name: "worker-1".into(),
            ..c
        };
        assert_eq!(named.resolve_instance_name(), "worker-1");
    }
}
