//! The broker configuration of `basalt broker` and `basalt standalone`,
//! layered: defaults, then (standalone) its own defaults, the `-c` file,
//! the flags given explicitly, `--set`. A flag left out never replaces a
//! file's value. Keys that are not applied are reported on stderr (and
//! refuse start with `--strict`); `--print-config` prints the result.

use std::net::IpAddr;
use std::path::PathBuf;

use basalt_broker::BrokerConfig;
use basalt_broker::config_layers::{ConfigSource, LayeredConfig};

use crate::cli::{Overrides, StandaloneArgs};

/// The NameServer port of `basalt standalone` when `--namesrv-port` is not given.
pub const STANDALONE_NAMESRV_PORT: u16 = 9876;

fn set_pairs(o: &Overrides) -> Result<Vec<(String, String)>, String> {
    o.set
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .ok_or_else(|| format!("--set {kv:?}: expected KEY=VALUE"))
        })
        .collect()
}

fn pair(k: &str, v: impl ToString) -> Vec<(String, String)> {
    vec![(k.to_string(), v.to_string())]
}

/// `basalt broker -c FILE [--set ...]`.
pub fn broker_config(file: &std::path::Path, o: &Overrides) -> Result<LayeredConfig, String> {
    let mut lc = LayeredConfig::new(BrokerConfig::default());
    lc.apply_file(file).map_err(|e| e.to_string())?;
    lc.apply_layer(&set_pairs(o)?, ConfigSource::Set)
        .map_err(|e| e.to_string())?;
    finish(lc, o)
}

/// `basalt standalone`: SQL92 filters on and data in ./basalt-data unless
/// the file or a flag says otherwise; the broker registers with the
/// embedded NameServer unless namesrvAddr is given.
pub fn standalone_config(a: &StandaloneArgs) -> Result<LayeredConfig, String> {
    let mode = ConfigSource::ModeDefault("standalone");
    let mut base = BrokerConfig {
        enable_property_filter: true,
        store_path_root_dir: PathBuf::from("./basalt-data"),
        ..BrokerConfig::default()
    };
    // Metrics and the dashboard are on (on free-if-taken ports).
    crate::serve_observe::standalone_defaults(&mut base);
    let mut lc = LayeredConfig::new(base);
    lc.mark(
        &[
            "enablePropertyFilter",
            "storePathRootDir",
            "metricsExporterType",
            "dashboardEnable",
        ],
        mode.clone(),
    );
    if let Some(p) = &a.config {
        lc.apply_file(p).map_err(|e| e.to_string())?;
    }
    let flag = |lc: &mut LayeredConfig, name: &'static str, pairs: Vec<(String, String)>| {
        lc.apply_layer(&pairs, ConfigSource::Flag(name))
            .map_err(|e| e.to_string())
    };
    if let Some(d) = &a.data {
        flag(&mut lc, "--data", pair("storePathRootDir", d.display()))?;
    }
    if let Some(p) = a.port {
        flag(&mut lc, "--port", pair("listenPort", p))?;
    }
    if let Some(l) = a.listen {
        flag(&mut lc, "--listen", pair("listenAddr", l))?;
    }
    if let Some(ip) = a.advertise {
        let mut p = pair("brokerIP1", ip);
        p.extend(pair("brokerIP2", ip));
        flag(&mut lc, "--advertise", p)?;
    }
    if lc.source_of("namesrvAddr") == &ConfigSource::Default {
        let ip: IpAddr = lc.config().broker_ip1;
        let port = a.namesrv_port.unwrap_or(STANDALONE_NAMESRV_PORT);
        lc.apply_layer(&pair("namesrvAddr", format!("{ip}:{port}")), mode)
            .map_err(|e| e.to_string())?;
    }
    lc.apply_layer(&set_pairs(&a.overrides)?, ConfigSource::Set)
        .map_err(|e| e.to_string())?;
    finish(lc, &a.overrides)
}

/// Reports the keys not applied on stderr, refuses unknown ones under
/// `--strict`, and validates.
fn finish(lc: LayeredConfig, o: &Overrides) -> Result<LayeredConfig, String> {
    for n in lc.notices() {
        eprintln!("basalt: {n}");
    }
    let unknown = lc.notices().iter().filter(|n| n.is_unknown()).count();
    if o.strict && unknown > 0 {
        return Err(format!(
            "{unknown} unknown setting(s) and --strict given: not starting"
        ));
    }
    lc.validate().map_err(|e| e.to_string())?;
    Ok(lc)
}
