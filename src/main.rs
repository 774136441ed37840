//! chainedge: an edge data plane for blockchain node fleets, on Pingora.

use chainedge::{
    auth, cli, cluster, config, console, edge, front, handlers, index, limits, mempool, observe,
    pools, routes, rpc, store, streams, upstream,
};

use clap::Parser;

/// mimalloc: the proxy path allocates small short-lived buffers per request, where it
/// beats the system allocator (see bench/RESULTS.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use pingora_core::listeners::tls::TlsSettings;
use pingora_core::listeners::{L4BufferSettings, ListenerConfig};
use pingora_core::server::configuration::{Opt, ServerConf};
use pingora_core::server::Server;
use pingora_core::services::listening::Service;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// L4 read buffer of a plain-HTTP client connection (0: read straight into the session's
/// own buffer).
const PLAIN_HTTP_READ_BUFFER: usize = 0;

#[derive(Parser, Debug)]
#[command(
    name = "chainedge",
    version,
    about = "Edge data plane for blockchain node fleets"
)]
struct Cli {
    /// Pingora's own flags: -c server YAML, -d daemon, -u upgrade, -t test configuration.
    #[command(flatten)]
    pingora: Opt,

    /// The app configuration (listeners, pools, plans, store, plugins directory), e.g.
    /// `conf/demo.yaml` or `/etc/chainedge/chainedge.yaml`. Required: there is no
    /// default file, so a server never starts on a config nobody chose.
    #[arg(long = "app", env = "CHAINEDGE_APP", global = true)]
    app: Option<PathBuf>,

    #[command(subcommand)]
    command: Option<cli::Command>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();

    let loaded = match load_all(&cli) {
        Ok(l) => l,
        Err(errors) => {
            for e in &errors {
                eprintln!("chainedge: {e}");
            }
            eprintln!(
                "chainedge: configuration invalid ({} problem(s))",
                errors.len()
            );
            return ExitCode::from(2);
        }
    };
    let (server_conf, app, matcher) = loaded;
    if let Some(cmd) = &cli.command {
        return cli::run(cmd, &app);
    }
    if cli.pingora.test {
        println!(
            "chainedge: configuration OK ({} routes from {}, app config {})",
            matcher.routes().len(),
            app.plugins_dir.display(),
            app.path.display()
        );
        return ExitCode::SUCCESS;
    }
    match run(cli, server_conf, app, matcher) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chainedge: {e}");
            ExitCode::from(1)
        }
    }
}

type LoadedAll = (ServerConf, config::Loaded, routes::matcher::Matcher);

/// Validate the Pingora YAML, the app config and every manifest; collect all problems.
fn load_all(cli: &Cli) -> Result<LoadedAll, Vec<config::ConfigError>> {
    let mut errors = Vec::new();
    let server_conf = match &cli.pingora.conf {
        Some(p) => match config::server::load(std::path::Path::new(p)) {
            Ok(c) => Some(c),
            Err(e) => {
                errors.push(e);
                None
            }
        },
        None => Some(config::server::defaults()),
    };
    let app = match cli.app.as_deref().map(config::load) {
        Some(Ok(a)) => Some(a),
        Some(Err(mut e)) => {
            errors.append(&mut e);
            None
        }
        None => {
            errors.push(config::ConfigError::new(
                std::path::Path::new("--app"),
                "",
                "no app configuration given: pass --app <file> or set CHAINEDGE_APP".into(),
            ));
            None
        }
    };
    let matcher = app.as_ref().and_then(|app| {
        let pools: Vec<&str> = config::POOL_NAMES.to_vec();
        let ctx = routes::RouteContext {
            plans: &app.app.plans,
            pools: &pools,
            switches: config::SWITCHES,
            base_edge: app.app.base_mode == config::BaseMode::Edge,
        };
        match routes::load(&app.plugins_dir, &ctx) {
            Ok(m) => Some(m),
            Err(mut e) => {
                errors.append(&mut e);
                None
            }
        }
    });
    // A limit for a category no route uses is almost certainly a typo.
    if let (Some(app), Some(m)) = (&app, &matcher) {
        let used: std::collections::BTreeSet<&str> = m
            .routes()
            .iter()
            .filter_map(|r| r.rate.as_deref())
            .chain(handlers::beacon::RATE_CATEGORIES.iter().copied())
            .collect();
        for cat in app.app.limits.categories.keys() {
            if !used.contains(cat.as_str()) {
                errors.push(config::ConfigError::new(
                    &app.path,
                    &format!("limits.categories.{cat}"),
                    format!("no route uses this rate category; categories are {used:?}"),
                ));
            }
        }
    }
    match (server_conf, app, matcher) {
        (Some(s), Some(a), Some(m)) if errors.is_empty() => Ok((s, a, m)),
        _ => Err(errors),
    }
}

fn run(
    cli: Cli,
    server_conf: ServerConf,
    app: config::Loaded,
    matcher: routes::matcher::Matcher,
) -> Result<(), String> {
    let pools = Arc::new(pools::Pools::from_config(&app)?);
    observe::metrics::init();
    let client = Arc::new(upstream::UpstreamClient::default());
    // Clustered: stream caps and filter hosts are shared through Redis on demand.
    let link = app
        .cluster_redis
        .as_ref()
        .map(|url| Arc::new(cluster::link::Link::new(url.expose())));
    let leases = Arc::new(cluster::leases::Leases::new(link.clone()));
    let gateway = Arc::new(rpc::Gateway {
        client: client.clone(),
        conf: rpc::RpcSettings::new(&app.app.rpc, &app.app.plans, &app.app.upgrade_url),
        filters: rpc::FilterHosts::new(link),
    });
    let metrics_cache =
        handlers::metrics_mirror::MetricsCache::new(app.app.metrics_mirror.clone(), client.clone());
    let http_addrs = app.app.listen.http.clone();
    let tls = app
        .app
        .listen
        .tls
        .iter()
        .map(|t| {
            let base = app.path.parent().unwrap_or(std::path::Path::new("."));
            (t.addr.clone(), base.join(&t.cert), base.join(&t.key))
        })
        .collect::<Vec<_>>();
    let metrics_addr = app.app.metrics.listen.clone();
    let threads = app.app.threads;

    let mut opt = cli.pingora;
    opt.conf = None; // already loaded (strictly) above
    let mut server = Server::new_with_opt_and_conf(opt, server_conf);
    // Daemonizes with -d: open the store only after, so no SQLite handle crosses a fork.
    server.bootstrap();

    let target = store::Target::from_config(&app).map_err(|e| e.to_string())?;
    let store =
        store::open_blocking(&target).map_err(|e| format!("store ({}): {e}", target.describe()))?;
    let console = console::Console::new(&app, store.clone(), client.clone())?;
    // One indexer per configured chain, in the background (src/index/).
    let indexers: Vec<_> = app
        .app
        .index
        .iter()
        .map(|(chain, conf)| {
            index::Indexer::new(
                chain,
                conf.clone(),
                pools.clone(),
                gateway.clone(),
                store.clone(),
            )
        })
        .collect();
    // Shared node subscriptions: WebSocket clients and the mempool watchers.
    let subscriptions = Arc::new(streams::subscriptions::Hub::default());
    // One mempool watcher per configured chain (src/mempool/).
    let mempools = Arc::new(mempool::Mempools::new(app.app.mempool.keys().cloned()));
    let watchers: Vec<_> = app
        .app
        .mempool
        .iter()
        .map(|(chain, conf)| {
            mempool::Watcher::new(
                chain,
                conf.clone(),
                pools.clone(),
                gateway.clone(),
                mempools.clone(),
                subscriptions.clone(),
            )
        })
        .collect();
    let keys = Arc::new(auth::keys::KeyAuth::new(
        store.clone(),
        app.app.auth.key_cache_size,
        std::time::Duration::from_millis(app.app.auth.key_cache_ttl_ms),
    ));
    let mut limiter = limits::Limiter::new(&app.app.limits, &app.app.plans);
    // With Redis, limits and revocations are shared with the other instances.
    let cluster = app.cluster_redis.as_ref().map(|url| {
        let shared = Arc::new(limits::shared::SharedCounts::new(
            app.app.limits.horizon_secs,
        ));
        limiter.share(shared.clone());
        let (cluster, notices) = cluster::Cluster::new(
            url.expose().to_string(),
            std::time::Duration::from_millis(app.app.cluster.sync_interval_ms),
            shared,
            keys.clone(),
        );
        keys.announce_to(notices);
        cluster
    });
    let state = Arc::new(edge::State {
        limiter,
        metrics_cache,
        console,
        stream_slots: Arc::new(handlers::mev_share::StreamSlots::new(leases.clone())),
        ws_connections: Arc::new(edge::WsConnections::new(leases)),
        subscriptions,
        matcher,
        config: app,
        pools,
        gateway,
        keys,
        store,
        mempools,
    });

    // Plain-HTTP connections meet the lean front first; it hands Pingora's proxy what it
    // does not serve itself, and every TLS connection (src/front/mod.rs).
    let pingora_edge = pingora_proxy::http_proxy(
        &server.configuration,
        edge::Edge {
            state: state.clone(),
        },
    );
    let front = front::LeanFront::new(
        edge::Edge {
            state: state.clone(),
        },
        pingora_edge,
    );
    let mut proxy = Service::new("chainedge edge".to_string(), front);
    for addr in &http_addrs {
        // Pingora's default 64 KiB read buffer per connection suits TLS records; on plain
        // HTTP the lean front reads into its own buffer anyway, and an idle keep-alive
        // connection would otherwise hold 64 KiB for nothing (bench/RESULTS.md).
        let buffers = L4BufferSettings::default().read(PLAIN_HTTP_READ_BUFFER);
        proxy.add_listener(ListenerConfig::tcp(addr.as_str()).l4_buffer(buffers));
    }
    for (addr, cert, key) in &tls {
        let mut settings =
            TlsSettings::intermediate(&cert.to_string_lossy(), &key.to_string_lossy())
                .map_err(|e| format!("TLS listener {addr}: {e}"))?;
        settings.enable_h2();
        proxy.add_tls_with_settings(addr, None, settings);
    }
    if threads.is_some() {
        proxy.threads = threads;
    }
    let edge_service = server.add_service(proxy);

    // The edge starts once the first health round has classified every host.
    let health = pingora_core::services::background::background_service(
        "health checks",
        pools::health::HealthChecker {
            pools: state.pools.clone(),
            conf: state.config.app.health.clone(),
        },
    );
    let health_service = server.add_service(health);
    edge_service.add_dependency(&health_service);
    if let Some(cluster) = cluster {
        server.add_service(pingora_core::services::background::background_service(
            "cluster", cluster,
        ));
    }
    for watcher in watchers {
        server.add_service(pingora_core::services::background::background_service(
            "mempool", watcher,
        ));
    }
    for indexer in indexers {
        server.add_service(pingora_core::services::background::background_service(
            "indexer", indexer,
        ));
    }

    let mut metrics = Service::new(
        "chainedge metrics".to_string(),
        observe::metrics::MetricsApp,
    );
    metrics.add_tcp(&metrics_addr);
    metrics.threads = Some(1);
    server.add_service(metrics);

    // `run` returns once the server has shut down (gracefully or after an upgrade).
    server.run(pingora_core::server::RunArgs::default());
    observe::access_log::flush();
    Ok(())
}
