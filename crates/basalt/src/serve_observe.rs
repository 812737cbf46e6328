//! What `basalt standalone` and `basalt broker` add for the metrics
//! endpoint and the dashboard: standalone's defaults (both on, at their
//! usual ports, a port in use only warning) and the start-up lines naming
//! where they are served.

use basalt_broker::metrics::settings::MetricsExporterType;
use basalt_broker::{BrokerConfig, BrokerHandle};

/// Standalone serves `/metrics` on 5557 and the dashboard on 8080 unless a
/// config file or `--set` says otherwise.
pub fn standalone_defaults(cfg: &mut BrokerConfig) {
    cfg.observe.metrics_exporter_type = MetricsExporterType::Prom;
    cfg.observe.dashboard_enable = true;
    cfg.observe.ports_best_effort = true;
}

/// Prints where the metrics and the dashboard are served (nothing for
/// what is off).
pub fn print_http(broker: &BrokerHandle, indent: &str) {
    if let Some(a) = broker.metrics_addr() {
        println!("{indent}metrics  http://{a}/metrics");
    }
    if let Some(a) = broker.dashboard_addr() {
        println!("{indent}dashboard http://{a}/");
    }
}
