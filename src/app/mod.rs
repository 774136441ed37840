//! The server assembled: configuration loaded and checked as a whole (`load`), then every
//! service built and run (`serve`): the edge on its listeners, health checks, the
//! cluster link, mempool watchers, indexers and the metrics listener.

mod detach;
mod reload;

use crate::capture;
use crate::{
    auth, cluster, config, contract, edge, front, handlers, limits, observe, pools, routes, rpc,
    store, upstream,
};
use pingora_core::listeners::tls::TlsSettings;
use pingora_core::listeners::{L4BufferSettings, ListenerConfig};
use pingora_core::server::configuration::{Opt, ServerConf};
use pingora_core::server::Server;
use pingora_core::services::listening::Service;
use pingora_core::services::ServiceHandle;
use std::path::Path;
use std::sync::Arc;

/// L4 read buffer of a plain-HTTP client connection (0: read straight into the session's
/// own buffer).
const PLAIN_HTTP_READ_BUFFER: usize = 0;

/// Everything a server starts from, each part validated.
pub struct Loaded {
    /// Pingora's server YAML (`-c`), or its defaults.
    pub server: ServerConf,
    /// The app configuration (`--app`).
    pub app: config::Loaded,
    /// The route table from the manifests the app configuration points at.
    pub matcher: routes::matcher::Matcher,
    /// The route table with its schemas (`plugins/contract/`): the API's OpenAPI document.
    pub contract: contract::Contract,
}

impl Loaded {
    /// The OpenAPI document of this route table.
    pub fn openapi(&self) -> serde_json::Value {
        self.contract.openapi(&self.matcher, &self.app.app.plans)
    }

    /// Routes of the table without a contract (`chainedge openapi --strict` fails on any).
    pub fn routes_without_contract(&self) -> Vec<&str> {
        self.contract.uncovered(&self.matcher)
    }
}

/// Validate the Pingora YAML (`server_yaml`), the app config and every manifest; collect
/// all problems.
pub fn load(
    server_yaml: Option<&str>,
    app_path: Option<&Path>,
    purpose: config::Purpose,
) -> Result<Loaded, Vec<config::ConfigError>> {
    let mut errors = Vec::new();
    let server_conf = match server_yaml {
        Some(p) => match config::server::load(std::path::Path::new(p)) {
            Ok(c) => Some(c),
            Err(e) => {
                errors.push(e);
                None
            }
        },
        None => Some(config::server::defaults()),
    };
    let app = match app_path.map(|p| config::load(p, purpose)) {
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
    let matcher = app.as_ref().and_then(|app| route_table(app, &mut errors));
    if let (Some(app), Some(m)) = (&app, &matcher) {
        unused_rate_categories(app, m, &mut errors);
    }
    let contract = match (&app, &matcher) {
        (Some(app), Some(m)) => {
            match contract::Contract::load(&app.plugins_dir.join("contract"), m) {
                Ok(c) => Some(c),
                Err(mut e) => {
                    errors.append(&mut e);
                    None
                }
            }
        }
        _ => None,
    };
    match (server_conf, app, matcher, contract) {
        (Some(server), Some(app), Some(matcher), Some(contract)) if errors.is_empty() => {
            Ok(Loaded {
                server,
                app,
                matcher,
                contract,
            })
        }
        _ => Err(errors),
    }
}

/// The route table from the manifests, against the configuration's plans, pools and
/// switches and the binary's channels and handlers.
fn route_table(
    app: &config::Loaded,
    errors: &mut Vec<config::ConfigError>,
) -> Option<routes::matcher::Matcher> {
    let pools: Vec<&str> = config::POOL_NAMES.to_vec();
    let handler_names = handlers::registry::names();
    let channels = handlers::channels::traits();
    let ctx = routes::RouteContext {
        plans: &app.app.plans,
        handlers: &handler_names,
        channels: &channels,
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
}

/// A limit for a category no route uses is almost certainly a typo.
fn unused_rate_categories(
    app: &config::Loaded,
    matcher: &routes::matcher::Matcher,
    errors: &mut Vec<config::ConfigError>,
) {
    let channels = handlers::channels::traits();
    let used: std::collections::BTreeSet<&str> = matcher
        .routes()
        .iter()
        .filter_map(|r| r.rate.as_deref())
        .chain(channels.iter().flat_map(|c| c.path_rates.iter().copied()))
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

/// Build every service from `loaded` and run the server until it shuts down (gracefully,
/// or after handing its listeners to a new process). `opt`: Pingora's own flags.
pub fn serve(mut opt: Opt, loaded: Loaded) -> Result<(), String> {
    let openapi = bytes::Bytes::from(loaded.openapi().to_string());
    let Loaded {
        server: server_conf,
        app,
        matcher,
        contract: _,
    } = loaded;
    observe::metrics::init();
    for advice in app.advice() {
        log::warn!("{advice}");
    }
    let metrics_addr = app.app.metrics.listen.clone();

    let server_yaml = opt.conf.take(); // already loaded (strictly) by `load`; a reload reads it again
    let app_path = app.path.clone();
    reload::ignore_hangup_until_listening();
    // Detached before the store opens, so no SQLite handle or thread crosses a fork.
    let mut server_conf = server_conf;
    detach::detach_if_asked(&mut opt, &mut server_conf)?;
    let mut server = Server::new_with_opt_and_conf(opt, server_conf);
    server.bootstrap();

    let target = store::Target::from_config(&app).map_err(|e| e.to_string())?;
    let store =
        store::open_blocking(&target).map_err(|e| format!("store ({}): {e}", target.describe()))?;
    let (state, cluster) = edge_state(app, matcher, store, openapi)?;
    let live = edge::Live::new(state.clone());
    let edge_service = add_edge(&mut server, &live, &state.config)?;

    // The edge starts once the first health round has classified every host.
    let health_pools = Arc::new(arc_swap::ArcSwap::new(state.pools.clone()));
    let health = pingora_core::services::background::background_service(
        "health checks",
        pools::health::HealthChecker {
            pools: health_pools.clone(),
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
    let durable_usage = add_capture(&mut server, &state)?;

    add_gateway_followers(&mut server, &state)?;
    let mut metrics = Service::new(
        "chainedge metrics".to_string(),
        observe::metrics::MetricsApp,
    );
    metrics.add_tcp(&metrics_addr);
    metrics.threads = Some(1);
    server.add_service(metrics);

    // `run` returns once the server has shut down (gracefully or after an upgrade).
    let reloader = reload::Reloader {
        server_yaml,
        app_path,
        live,
        health_pools,
        health: state.config.app.health.clone(),
    };
    server.run(pingora_core::server::RunArgs {
        shutdown_signal: Box::new(reload::Signals(reloader)),
    });
    // Every request has been answered and counted: the last counts go to the store.
    if let Some(durable) = durable_usage {
        durable.finish();
    }
    observe::access_log::flush();
    Ok(())
}

/// What the JSON-RPC gateway follows in the background: the response cache's heads and
/// finality (src/rpc/cache.rs) and the beacon light client that roots proven answers
/// (src/rpc/light_client.rs), each when configured.
fn add_gateway_followers(server: &mut Server, state: &edge::State) -> Result<(), String> {
    if state.config.app.rpc.cache.enabled {
        server.add_service(pingora_core::services::background::background_service(
            "cache tracker",
            rpc::CacheTracker {
                gateway: state.gateway.clone(),
                pools: state.pools.clone(),
            },
        ));
    }
    let root = state.config.app.rpc.verify.root.as_ref();
    if let Some(conf) = root.and_then(|r| r.light_client.clone()) {
        let network = conf.network.network()?;
        server.add_service(pingora_core::services::background::background_service(
            "light client",
            rpc::LightClientFollower {
                gateway: state.gateway.clone(),
                pools: state.pools.clone(),
                conf,
                network,
            },
        ));
    }
    Ok(())
}

/// The edge's listeners on `server`: plain-HTTP connections meet the lean front first;
/// it hands Pingora's proxy what it does not serve itself, and every TLS connection
/// (src/front/mod.rs). Both take each request's state from `live`, which a reload
/// (SIGHUP) replaces.
fn add_edge(
    server: &mut Server,
    live: &Arc<edge::Live>,
    app: &config::Loaded,
) -> Result<ServiceHandle, String> {
    let pingora_edge =
        pingora_proxy::http_proxy(&server.configuration, edge::Edge::live(live.clone()));
    let front = front::LeanFront::new(edge::Edge::live(live.clone()), pingora_edge);
    let mut proxy = Service::new("chainedge edge".to_string(), front);
    // Pingora's default 64 KiB read buffer per connection suits TLS records; on plain
    // HTTP the lean front reads into its own buffer anyway, and an idle keep-alive
    // connection would otherwise hold 64 KiB for nothing (bench/RESULTS.md). The admin
    // listener is served by the same edge, which keeps admin routes to it alone.
    let plain = app
        .app
        .listen
        .http
        .iter()
        .cloned()
        .chain(app.admin_listen.map(|a| a.to_string()));
    for addr in plain {
        let buffers = L4BufferSettings::default().read(PLAIN_HTTP_READ_BUFFER);
        proxy.add_listener(ListenerConfig::tcp(&addr).l4_buffer(buffers));
    }
    let base = app.path.parent().unwrap_or(Path::new("."));
    for t in &app.app.listen.tls {
        let (cert, key) = (base.join(&t.cert), base.join(&t.key));
        let mut settings =
            TlsSettings::intermediate(&cert.to_string_lossy(), &key.to_string_lossy())
                .map_err(|e| format!("TLS listener {}: {e}", t.addr))?;
        settings.enable_h2();
        proxy.add_tls_with_settings(&t.addr, None, settings);
    }
    // TLS listeners behind an L4 proxy read its PROXY header before the handshake
    // (plain ones in the front, src/front/proxy_protocol.rs).
    let proxied = app.app.listen.proxied();
    let proxied_tls: std::collections::HashSet<std::net::SocketAddr> = (app.app.listen.tls)
        .iter()
        .filter_map(|t| t.addr.parse().ok())
        .filter(|a| proxied.contains(a))
        .collect();
    if !proxied_tls.is_empty() {
        let before = front::proxy_protocol::BeforeTls {
            listeners: proxied_tls,
        };
        proxy.endpoints().set_pre_tls_callback(Arc::new(before));
    }
    if app.app.threads.is_some() {
        proxy.threads = app.app.threads;
    }
    Ok(server.add_service(proxy))
}

/// Background capture on `server`: indexers, mempool watchers, Solana's producers, the
/// capacity series, the usage flusher (src/capture/). The usage journal is made now,
/// so an unwritable state_dir stops the start; it is returned for the final flush.
fn add_capture(
    server: &mut Server,
    state: &edge::State,
) -> Result<Option<Arc<capture::usage::Durable>>, String> {
    let usage_conf = &state.config.app.usage;
    let durable_usage = if usage_conf.enabled {
        Some(capture::usage::Durable::open(
            state.usage().clone(),
            state.store().clone(),
            &state.config.state_dir,
            std::time::Duration::from_millis(usage_conf.journal_interval_ms),
            usage_conf.max_pending_keys,
        )?)
    } else {
        None
    };
    let producers = capture::producers(&capture::Inputs {
        shared: &state.shared,
        config: &state.config,
        pools: &state.pools,
        gateway: &state.gateway,
        usage: durable_usage.as_ref(),
    });
    for producer in producers {
        let name = format!("capture {}", producer.name());
        server.add_service(pingora_core::services::background::background_service(
            &name,
            capture::Service::new(producer),
        ));
    }
    Ok(durable_usage)
}

/// With Redis, limits and revocations are shared with the other instances.
fn join_cluster(
    app: &config::Loaded,
    limiter: &mut limits::Limiter,
    keys: &Arc<auth::keys::KeyAuth>,
) -> Option<cluster::Cluster> {
    let url = app.cluster_redis.as_ref()?;
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
    Some(cluster)
}

/// The edge's state from a checked configuration and an open store: pools, the gateway,
/// limits and costs, around every long-lived service (`state::shared::Shared`); and,
/// when clustered, the service that shares limits and notices over Redis (the caller
/// runs it).
pub(crate) fn edge_state(
    app: config::Loaded,
    matcher: routes::matcher::Matcher,
    store: store::Store,
    openapi: bytes::Bytes,
) -> Result<(Arc<edge::State>, Option<cluster::Cluster>), String> {
    let pools = Arc::new(pools::Pools::from_config(&app)?);
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
        filters: Arc::new(rpc::FilterHosts::new(link)),
        in_flight: Default::default(),
        cache: Arc::new(rpc::ResponseCache::new(&app.app.rpc.cache, &pools)),
        txlog: Arc::new(crate::tracking::TxLog::new(app.app.tx_tracking.enabled)),
        checked: Default::default(),
    });
    let shared = Arc::new(crate::state::shared::Shared::build(
        &app, store, &pools, &gateway, client, leases,
    )?);
    let mut limiter = limits::Limiter::new(&app.app.limits, &app.app.plans);
    let cluster = join_cluster(&app, &mut limiter, shared.keys());
    let state = Arc::new(edge::State {
        shared,
        openapi,
        matcher,
        limiter,
        compute_units: rpc::compute_units::ComputeUnits::new(&app.app.compute_units),
        config: app,
        pools,
        gateway,
    });
    Ok((state, cluster))
}

/// The edge's state for a reloaded configuration (SIGHUP): routes, plans, limits, pools,
/// the method table and RPC settings and the cost table from `app`; everything that
/// holds state is `old`'s `Shared` (keys, usage, caches, sessions, subscriptions,
/// streams, the store, the console), and unchanged hosts carried over with their
/// health. What only a new process can change is named in `reload::changes`.
pub(crate) fn reloaded_state(
    old: &edge::State,
    app: config::Loaded,
    matcher: routes::matcher::Matcher,
    openapi: bytes::Bytes,
) -> Result<edge::State, String> {
    let pools = Arc::new(pools::Pools::from_config(&app)?.carry_over(&old.pools));
    let same_pools = {
        let mut a: Vec<&str> = old.pools.all().map(|p| p.name.as_str()).collect();
        let mut b: Vec<&str> = pools.all().map(|p| p.name.as_str()).collect();
        a.sort_unstable();
        b.sort_unstable();
        a == b
    };
    let same_cache =
        format!("{:?}", old.config.app.rpc.cache) == format!("{:?}", app.app.rpc.cache);
    let cache = if same_pools && same_cache {
        old.gateway.cache.clone()
    } else {
        Arc::new(rpc::ResponseCache::new(&app.app.rpc.cache, &pools))
    };
    let gateway = Arc::new(rpc::Gateway {
        client: old.gateway.client.clone(),
        conf: rpc::RpcSettings::new(&app.app.rpc, &app.app.plans, &app.app.upgrade_url),
        filters: old.gateway.filters.clone(),
        in_flight: old.gateway.in_flight.clone(),
        txlog: old.gateway.txlog.clone(),
        checked: old.gateway.checked.clone(),
        cache,
    });
    Ok(edge::State {
        shared: old.shared.clone(),
        openapi,
        matcher,
        limiter: old.limiter.reconfigured(&app.app.limits, &app.app.plans),
        compute_units: rpc::compute_units::ComputeUnits::new(&app.app.compute_units),
        pools,
        gateway,
        config: app,
    })
}
