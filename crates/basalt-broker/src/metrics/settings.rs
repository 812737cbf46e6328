//! The broker.conf keys of the Prometheus exporter and the dashboard.
//! `metricsExporterType` and `metricsPromExporterHost`/`Port` are RocketMQ
//! 5's names; the `dashboard*` keys are Basalt's.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use crate::config::ConfigError;

/// How metrics leave the broker (RocketMQ 5's `metricsExporterType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricsExporterType {
    /// No exporter (`DISABLE`, RocketMQ's default).
    Disable,
    /// An HTTP endpoint Prometheus scrapes (`PROM`).
    Prom,
}

/// The exporter and dashboard settings. Invariant: a port of 0 binds any
/// free port (tests), which the started broker reports.
#[derive(Debug, Clone)]
pub struct ObservabilityConfig {
    pub metrics_exporter_type: MetricsExporterType,
    pub metrics_prom_exporter_host: IpAddr,
    pub metrics_prom_exporter_port: u16,
    /// Whether the dashboard is served (`dashboardEnable`).
    pub dashboard_enable: bool,
    pub dashboard_host: IpAddr,
    pub dashboard_port: u16,
    /// Whether the dashboard may create topics and groups and reset
    /// offsets (`dashboardAdminEnable`); read-only otherwise.
    pub dashboard_admin_enable: bool,
    /// How often the dashboard's history takes a sample.
    pub dashboard_sample_interval: Duration,
    /// How much history is kept (in memory, bounded by this).
    pub dashboard_history: Duration,
    /// Not a key: a port that cannot be bound only warns (standalone's
    /// default ports, which another process may hold) instead of failing.
    pub ports_best_effort: bool,
}

impl Default for ObservabilityConfig {
    fn default() -> Self {
        ObservabilityConfig {
            metrics_exporter_type: MetricsExporterType::Disable,
            metrics_prom_exporter_host: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            metrics_prom_exporter_port: 5557,
            dashboard_enable: false,
            dashboard_host: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            dashboard_port: 8080,
            dashboard_admin_enable: false,
            dashboard_sample_interval: Duration::from_secs(5),
            dashboard_history: Duration::from_secs(600),
            ports_best_effort: false,
        }
    }
}

fn invalid(key: &str, v: &str, reason: &str) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_string(),
        value: v.to_string(),
        reason: reason.to_string(),
    }
}

fn parse<T: std::str::FromStr>(key: &str, v: &str) -> Result<T, ConfigError> {
    v.parse()
        .map_err(|_| invalid(key, v, "not a valid value for this key"))
}

fn parse_bool(key: &str, v: &str) -> Result<bool, ConfigError> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, v, "expected true or false")),
    }
}

fn parse_ms(key: &str, v: &str) -> Result<Duration, ConfigError> {
    let ms: u64 = parse(key, v)?;
    if ms == 0 {
        return Err(invalid(key, v, "must be above 0"));
    }
    Ok(Duration::from_millis(ms))
}

impl ObservabilityConfig {
    /// Whether anything reads the broker's metric registry.
    pub fn records(&self) -> bool {
        self.metrics_exporter_type == MetricsExporterType::Prom || self.dashboard_enable
    }

    /// Applies one key; `Ok(false)` for a key this part does not own.
    pub fn set(&mut self, key: &str, v: &str) -> Result<bool, ConfigError> {
        match key {
            "metricsExporterType" => {
                self.metrics_exporter_type = match v.to_ascii_uppercase().as_str() {
                    "DISABLE" => MetricsExporterType::Disable,
                    "PROM" => MetricsExporterType::Prom,
                    "OTLP_GRPC" | "LOG" => {
                        return Err(invalid(
                            key,
                            v,
                            "Basalt exports metrics only as PROM (or DISABLE)",
                        ));
                    }
                    _ => return Err(invalid(key, v, "expected DISABLE or PROM")),
                }
            }
            "metricsPromExporterHost" => {
                self.metrics_prom_exporter_host = if v.is_empty() {
                    IpAddr::V4(Ipv4Addr::UNSPECIFIED)
                } else {
                    parse(key, v)?
                }
            }
            "metricsPromExporterPort" => self.metrics_prom_exporter_port = parse(key, v)?,
            "dashboardEnable" => self.dashboard_enable = parse_bool(key, v)?,
            "dashboardHost" => self.dashboard_host = parse(key, v)?,
            "dashboardPort" => self.dashboard_port = parse(key, v)?,
            "dashboardAdminEnable" => self.dashboard_admin_enable = parse_bool(key, v)?,
            "dashboardSampleIntervalMs" => self.dashboard_sample_interval = parse_ms(key, v)?,
            "dashboardHistorySeconds" => {
                let s: u64 = parse(key, v)?;
                if !(10..=86_400).contains(&s) {
                    return Err(invalid(key, v, "must be in 10..=86400"));
                }
                self.dashboard_history = Duration::from_secs(s);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The keys [`Self::set`] reads, with their values.
    pub fn properties(&self) -> Vec<(&'static str, String)> {
        let kind = match self.metrics_exporter_type {
            MetricsExporterType::Disable => "DISABLE",
            MetricsExporterType::Prom => "PROM",
        };
        vec![
            ("metricsExporterType", kind.to_string()),
            (
                "metricsPromExporterHost",
                self.metrics_prom_exporter_host.to_string(),
            ),
            (
                "metricsPromExporterPort",
                self.metrics_prom_exporter_port.to_string(),
            ),
            ("dashboardEnable", self.dashboard_enable.to_string()),
            ("dashboardHost", self.dashboard_host.to_string()),
            ("dashboardPort", self.dashboard_port.to_string()),
            (
                "dashboardAdminEnable",
                self.dashboard_admin_enable.to_string(),
            ),
            (
                "dashboardSampleIntervalMs",
                self.dashboard_sample_interval.as_millis().to_string(),
            ),
            (
                "dashboardHistorySeconds",
                self.dashboard_history.as_secs().to_string(),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_properties() {
        let mut c = ObservabilityConfig::default();
        c.set("metricsExporterType", "prom").unwrap();
        c.set("metricsPromExporterPort", "0").unwrap();
        c.set("dashboardEnable", "true").unwrap();
        c.set("dashboardSampleIntervalMs", "250").unwrap();
        let mut d = ObservabilityConfig::default();
        for (k, v) in c.properties() {
            assert!(d.set(k, &v).unwrap(), "{k}");
        }
        assert_eq!(d.metrics_exporter_type, MetricsExporterType::Prom);
        assert_eq!(d.metrics_prom_exporter_port, 0);
        assert!(d.dashboard_enable && d.records());
        assert_eq!(d.dashboard_sample_interval, Duration::from_millis(250));
        assert!(c.set("metricsExporterType", "OTLP_GRPC").is_err());
        assert!(!c.set("flushDiskType", "SYNC_FLUSH").unwrap());
    }
}
