//! A [`BrokerConfig`] built from layers — defaults, a mode's defaults
//! (standalone), a file, command-line flags, `--set` — in that order,
//! remembering which layer gave each setting its value and which keys were
//! not applied. `--print-config` shows the result; the start-up warnings
//! come from [`LayeredConfig::notices`].

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::config::{BrokerConfig, ConfigError, properties_pairs, toml_pairs};
use crate::config_keys::{KeyKind, canonical_key, classify_key, key_warning};

/// Where a setting's effective value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    /// RocketMQ's default (Basalt's where it has none).
    Default,
    /// The default of a way of running, e.g. `standalone`.
    ModeDefault(&'static str),
    /// A configuration file.
    File(PathBuf),
    /// A command-line flag, e.g. `--port`.
    Flag(&'static str),
    /// `--set KEY=VALUE`.
    Set,
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigSource::Default => f.write_str("default"),
            ConfigSource::ModeDefault(m) => write!(f, "{m} default"),
            ConfigSource::File(p) => write!(f, "file {}", p.display()),
            ConfigSource::Flag(n) => write!(f, "flag {n}"),
            ConfigSource::Set => f.write_str("--set"),
        }
    }
}

/// A key a layer gave that was not applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyNotice {
    pub key: String,
    pub source: ConfigSource,
    pub kind: KeyKind,
}

impl KeyNotice {
    /// Whether `--strict` refuses to start over it (unknown, not a
    /// deliberately ignored RocketMQ key).
    pub fn is_unknown(&self) -> bool {
        matches!(self.kind, KeyKind::Unknown { .. })
    }
}

impl fmt::Display for KeyNotice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = key_warning(&self.key, &self.source.to_string());
        f.write_str(text.as_deref().unwrap_or("applied"))
    }
}

/// A broker configuration with the layer each setting came from. Every key
/// of [`BrokerConfig::properties`] has a source ([`ConfigSource::Default`]
/// until a layer sets it); a later layer replaces an earlier one's value.
#[derive(Debug, Clone)]
pub struct LayeredConfig {
    config: BrokerConfig,
    sources: HashMap<&'static str, ConfigSource>,
    notices: Vec<KeyNotice>,
}

impl LayeredConfig {
    /// Starts from `base`, every setting sourced [`ConfigSource::Default`].
    pub fn new(base: BrokerConfig) -> LayeredConfig {
        LayeredConfig {
            config: base,
            sources: HashMap::new(),
            notices: Vec::new(),
        }
    }

    /// Records that `keys` hold a mode's default rather than RocketMQ's.
    pub fn mark(&mut self, keys: &[&'static str], source: ConfigSource) {
        for k in keys {
            self.sources.insert(k, source.clone());
        }
    }

    /// Applies a `.properties` (or `.toml`) file as one layer.
    pub fn apply_file(&mut self, path: &Path) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let pairs = if path.extension().and_then(|e| e.to_str()) == Some("toml") {
            toml_pairs(&text).map_err(|detail| ConfigError::Syntax {
                path: path.to_path_buf(),
                detail,
            })?
        } else {
            properties_pairs(&text)
        };
        self.apply_layer(&pairs, ConfigSource::File(path.to_path_buf()))
    }

    /// Applies pairs in order as one layer. `listenPort` moves
    /// `haListenPort` with it unless this layer or an earlier one gave
    /// `haListenPort`. Not validated: call [`Self::validate`] after the
    /// last layer (a later layer may fix what an earlier one left).
    pub fn apply_layer(
        &mut self,
        pairs: &[(String, String)],
        source: ConfigSource,
    ) -> Result<(), ConfigError> {
        let before: HashMap<&'static str, String> = self.config.properties().into_iter().collect();
        let mut named = Vec::new();
        for (k, v) in pairs {
            if self.config.set(k, v)? {
                named.push(canonical_key(k).to_string());
            } else {
                self.notices.push(KeyNotice {
                    key: k.clone(),
                    source: source.clone(),
                    kind: classify_key(k),
                });
            }
        }
        let ha_named = named.iter().any(|k| k == "haListenPort");
        let ha_kept = self.source_of("haListenPort") != &ConfigSource::Default;
        if !ha_named && ha_kept && named.iter().any(|k| k == "listenPort") {
            self.config.set("haListenPort", &before["haListenPort"])?;
        }
        for (k, v) in self.config.properties() {
            if before.get(k) != Some(&v) || named.iter().any(|n| n == k) {
                self.sources.insert(k, source.clone());
            }
        }
        Ok(())
    }

    /// Checks the settings that only make sense together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.config.validate()
    }

    pub fn config(&self) -> &BrokerConfig {
        &self.config
    }

    pub fn into_config(self) -> BrokerConfig {
        self.config
    }

    /// Keys the layers gave that were not applied, in the order seen.
    pub fn notices(&self) -> &[KeyNotice] {
        &self.notices
    }

    /// The layer that gave `key` (a [`BrokerConfig::properties`] key) its value.
    pub fn source_of(&self, key: &str) -> &ConfigSource {
        self.sources.get(key).unwrap_or(&ConfigSource::Default)
    }

    /// Every setting with its value and source, in `properties()` order.
    pub fn effective(&self) -> Vec<(&'static str, String, ConfigSource)> {
        self.config
            .properties()
            .into_iter()
            .map(|(k, v)| (k, v, self.source_of(k).clone()))
            .collect()
    }

    /// [`Self::effective`] as an aligned table: key, value, source.
    pub fn effective_text(&self) -> String {
        let rows = self.effective();
        let kw = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
        let vw = rows
            .iter()
            .map(|r| r.1.chars().count().min(40))
            .max()
            .unwrap_or(0);
        let mut s = format!("{:kw$}  {:vw$}  SOURCE\n", "KEY", "VALUE");
        for (k, v, src) in rows {
            s.push_str(&format!("{k:kw$}  {v:vw$}  {src}\n"));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        properties_pairs(text)
    }

    #[test]
    fn each_value_names_its_layer() {
        let mut lc = LayeredConfig::new(BrokerConfig::default());
        let file = ConfigSource::File(PathBuf::from("b.conf"));
        lc.apply_layer(&pairs("listenPort=20911\nbrokerName=b1\n"), file.clone())
            .unwrap();
        lc.apply_layer(&pairs("brokerName=b2"), ConfigSource::Set)
            .unwrap();
        assert_eq!(lc.source_of("listenPort"), &file);
        // Moved with listenPort, so it comes from the same layer.
        assert_eq!(lc.source_of("haListenPort"), &file);
        assert_eq!(lc.config().ha_listen_port, 20912);
        assert_eq!(lc.source_of("brokerName"), &ConfigSource::Set);
        assert_eq!(lc.config().broker_name, "b2");
        assert_eq!(lc.source_of("flushDiskType"), &ConfigSource::Default);
        // Named with its default value: still the file's.
        lc.apply_layer(&pairs("deleteWhen=04"), file.clone())
            .unwrap();
        assert_eq!(lc.source_of("deleteWhen"), &file);
        let text = lc.effective_text();
        assert!(text.contains("--set"), "{text}");
        assert!(text.contains("file b.conf"), "{text}");
    }

    #[test]
    fn an_earlier_ha_port_survives_a_later_listen_port() {
        let mut lc = LayeredConfig::new(BrokerConfig::default());
        let file = ConfigSource::File(PathBuf::from("b.conf"));
        lc.apply_layer(&pairs("haListenPort=30000"), file.clone())
            .unwrap();
        lc.apply_layer(&pairs("listenPort=20911"), ConfigSource::Flag("--port"))
            .unwrap();
        assert_eq!(lc.config().listen_port, 20911);
        assert_eq!(lc.config().ha_listen_port, 30000);
        assert_eq!(lc.source_of("haListenPort"), &file);
    }

    #[test]
    fn unknown_and_ignored_keys_are_noticed() {
        let mut lc = LayeredConfig::new(BrokerConfig::default());
        let file = ConfigSource::File(PathBuf::from("b.conf"));
        lc.apply_layer(
            &pairs("flushDiskTyp=SYNC_FLUSH\nsendMessageThreadPoolNums=8\n"),
            file,
        )
        .unwrap();
        lc.apply_layer(&pairs("lisenPort=1"), ConfigSource::Set)
            .unwrap();
        let n = lc.notices();
        assert_eq!(n.len(), 3);
        assert!(n[0].is_unknown());
        assert!(
            n[0].to_string().contains("did you mean flushDiskType?"),
            "{}",
            n[0]
        );
        assert!(!n[1].is_unknown());
        assert!(n[1].to_string().contains("ignores"), "{}", n[1]);
        assert!(n[2].to_string().contains("(--set)"), "{}", n[2]);
        assert!(n[2].to_string().contains("listenPort"), "{}", n[2]);
    }
}
