//! The long-running roles: standalone, namesrv, broker.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use basalt_broker::transport_security::{SecuritySettings, TransportSecurity};
use basalt_namesrv::{NameServer, NamesrvConfig};

use crate::cli::{BrokerArgs, NamesrvArgs, StandaloneArgs};
use crate::{fd_limit, page_reporting, serve_config};

fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("basalt-worker")
        .on_thread_park(crate::allocator::on_worker_park)
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// The signals that stop a server: Ctrl-C, and SIGTERM on Unix. Made
/// before the server says it is ready, so a SIGTERM that follows the ready
/// line at once is a clean shutdown, not the default action's kill (a test
/// that stopped a broker right after it started saw signal 15).
struct ShutdownSignal {
    #[cfg(unix)]
    term: Option<tokio::signal::unix::Signal>,
}

impl ShutdownSignal {
    /// Installs the SIGTERM handler now; must run inside the runtime.
    fn install() -> ShutdownSignal {
        ShutdownSignal {
            #[cfg(unix)]
            term: tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok(),
        }
    }

    /// Waits for Ctrl-C or SIGTERM.
    async fn wait(self) {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        if let Some(mut term) = self.term {
            tokio::select! {
                _ = ctrl_c => {}
                _ = term.recv() => {}
            }
            return;
        }
        let _ = ctrl_c.await;
    }
}

pub fn standalone(a: StandaloneArgs) -> Result<ExitCode, String> {
    let started = std::time::Instant::now();
    let layered = serve_config::standalone_config(&a)?;
    if a.overrides.print_config {
        print!("{}", layered.effective_text());
        return Ok(ExitCode::SUCCESS);
    }
    let cfg = layered.into_config();
    let namesrv_listen = SocketAddr::new(
        cfg.listen_addr,
        a.namesrv_port
            .unwrap_or(serve_config::STANDALONE_NAMESRV_PORT),
    );
    let kv_config_path = cfg
        .store_path_root_dir
        .join("namesrv")
        .join("kvConfig.json");
    let advertise = cfg.broker_ip1;
    page_reporting::warn_if_active();
    let rt = runtime()?;
    let fds = fd_limit::raise_to_hard();
    rt.block_on(async move {
        let stop = ShutdownSignal::install();
        // The NameServer shares the broker's cap and this process's descriptors.
        fd_limit::warn_if_caps_exceed(2 * cfg.server_max_connections, fds);
        let security = TransportSecurity::load(&cfg.security)
            .await
            .map_err(|e| format!("NameServer: {e}"))?
            .listener("namesrv");
        let ns = NameServer::start(NamesrvConfig {
            listen: namesrv_listen,
            max_connections: cfg.server_max_connections,
            kv_config_path: Some(kv_config_path),
            order_message_enable: a.order_message_enable,
            security,
            auth: namesrv_gate(&cfg.auth, &cfg.broker_cluster_name),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("NameServer: {e}"))?;
        let broker = basalt_broker::start(cfg)
            .await
            .map_err(|e| format!("broker: {e}"))?;
        let b = broker.broker().clone();
        println!(
            "basalt standalone ready in {} ms",
            started.elapsed().as_millis()
        );
        println!(
            "  namesrv  {} (clients: namesrvAddr={}:{})",
            ns.local_addr(),
            advertise,
            ns.local_addr().port()
        );
        println!(
            "  broker   {} cluster={} name={} listening on {}",
            b.broker_addr(),
            b.config().broker_cluster_name,
            b.config().broker_name,
            broker.local_addr()
        );
        println!("  store    {}", b.config().store_path_root_dir.display());
        println!("  flush    {}", b.config().flush_disk_type);
        let grpc = crate::serve_grpc::start(&broker).await;
        crate::serve_grpc::print(grpc.as_ref(), advertise, "  ");
        crate::serve_observe::print_http(&broker, "  ");
        stop.wait().await;
        println!("shutting down");
        if let Some(g) = grpc {
            g.shutdown().await;
        }
        broker.shutdown().await;
        ns.shutdown().await;
        Ok::<(), String>(())
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `~/namesrv/kvConfig.json`, Java's default `kvConfigPath`.
fn default_kv_config_path() -> std::path::PathBuf {
    std::env::var_os("HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from("."))
        .join("namesrv")
        .join("kvConfig.json")
}

/// The NameServer's auth gate: on when `authenticationEnabled`, with the
/// super users the settings name (docs/auth.md#nameserver).
fn namesrv_gate(
    settings: &basalt_auth::AuthSettings,
    cluster: &str,
) -> Option<std::sync::Arc<basalt_auth::AuthGate>> {
    settings.authentication_enabled.then(|| {
        std::sync::Arc::new(basalt_auth::AuthGate::new(
            settings.clone(),
            cluster,
            None,
            None,
        ))
    })
}

/// What a NameServer takes from its config file: TLS (`tls.*`) and auth
/// (`authenticationEnabled`, `initAuthenticationUser`,
/// `innerClientAuthenticationCredentials`, `authenticationWhitelist`).
async fn namesrv_file_settings(
    file: Option<&std::path::Path>,
) -> Result<
    (
        Option<std::sync::Arc<basalt_remoting::ServerSecurity>>,
        basalt_auth::AuthSettings,
    ),
    String,
> {
    let mut settings = SecuritySettings::default();
    let mut auth = basalt_auth::AuthSettings::default();
    if let Some(file) = file {
        let text = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        for (k, v) in basalt_broker::config::properties_pairs(&text) {
            if basalt_remoting::TlsSettings::is_tls_key(&k) {
                settings.set(&k, &v).map_err(|e| e.to_string())?;
            } else {
                auth.set(&k, &v)
                    .map_err(|e| format!("{}: {k}: {e}", file.display()))?;
            }
        }
    }
    let security = TransportSecurity::load(&settings)
        .await
        .map_err(|e| format!("NameServer: {e}"))?
        .listener("namesrv");
    Ok((security, auth))
}

pub fn namesrv(a: NamesrvArgs) -> Result<ExitCode, String> {
    let rt = runtime()?;
    let fds = fd_limit::raise_to_hard();
    rt.block_on(async move {
        let stop = ShutdownSignal::install();
        fd_limit::warn_if_caps_exceed(a.max_connections, fds);
        let (security, auth) = namesrv_file_settings(a.config.as_deref()).await?;
        let ns = NameServer::start(NamesrvConfig {
            listen: SocketAddr::new(a.listen, a.port),
            max_connections: a.max_connections.max(1),
            kv_config_path: Some(a.kv_config.clone().unwrap_or_else(default_kv_config_path)),
            order_message_enable: a.order_message_enable,
            security,
            auth: namesrv_gate(&auth, "DefaultCluster"),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("NameServer: {e}"))?;
        println!("basalt namesrv listening on {}", ns.local_addr());
        stop.wait().await;
        ns.shutdown().await;
        Ok::<(), String>(())
    })?;
    Ok(ExitCode::SUCCESS)
}

pub fn broker(a: BrokerArgs) -> Result<ExitCode, String> {
    let layered = serve_config::broker_config(&a.config, &a.overrides)?;
    if a.overrides.print_config {
        print!("{}", layered.effective_text());
        return Ok(ExitCode::SUCCESS);
    }
    let cfg = layered.into_config();
    page_reporting::warn_if_active();
    let rt = runtime()?;
    let fds = fd_limit::raise_to_hard();
    rt.block_on(async move {
        let stop = ShutdownSignal::install();
        fd_limit::warn_if_caps_exceed(cfg.server_max_connections, fds);
        let broker = basalt_broker::start(cfg)
            .await
            .map_err(|e| format!("broker: {e}"))?;
        let b = broker.broker().clone();
        println!(
            "basalt broker {} (id {}, {}) listening on {}, store {}",
            b.config().broker_name,
            b.config().broker_id,
            b.config().broker_role,
            broker.local_addr(),
            b.config().store_path_root_dir.display()
        );
        let grpc = crate::serve_grpc::start(&broker).await;
        crate::serve_grpc::print(grpc.as_ref(), b.config().broker_ip1, "");
        crate::serve_observe::print_http(&broker, "");
        stop.wait().await;
        if let Some(g) = grpc {
            g.shutdown().await;
        }
        broker.shutdown().await;
        Ok::<(), String>(())
    })?;
    // Give the logger a moment to drain.
    std::thread::sleep(Duration::from_millis(10));
    Ok(ExitCode::SUCCESS)
}
