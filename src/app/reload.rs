//! Signals, and the configuration reloaded in place on SIGHUP.
//!
//! | signal | what the process does |
//! |---|---|
//! | `SIGHUP` | reload the app configuration in place (`Reloader::reload`) and go on serving |
//! | `SIGQUIT` | graceful upgrade: hand the listeners to the new process (`-u`), drain, exit |
//! | `SIGTERM` | graceful stop: drain, exit |
//! | `SIGINT` | fast stop |
//!
//! A reload reads and checks the whole configuration as `-t` does; a file with any
//! problem is refused with the reasons in the log and the running configuration is
//! kept. A good one builds a new edge state (`super::reloaded_state`), runs one health
//! round over its pools (so a new host is classified before traffic reaches it), and
//! swaps it in: requests already running finish on the old state, the next ones start on
//! the new; WebSocket sessions and streams keep theirs.

use super::{load, reloaded_state};
use crate::{config, edge, pools, upstream};
use async_trait::async_trait;
use pingora_core::server::{ShutdownSignal, ShutdownSignalWatch};
use std::path::PathBuf;
use std::sync::Arc;
use tokio::signal::unix::{signal, SignalKind};

/// What a reload needs: where the configuration is, and where the running state is.
pub struct Reloader {
    pub server_yaml: Option<String>,
    pub app_path: PathBuf,
    pub live: Arc<edge::Live>,
    /// The pools the health checks walk.
    pub health_pools: Arc<arc_swap::ArcSwap<pools::Pools>>,
    pub health: config::HealthConf,
}

impl Reloader {
    /// Read, check and apply the configuration; the running one stays on any problem.
    pub async fn reload(&self) {
        let loaded = match load(
            self.server_yaml.as_deref(),
            Some(&self.app_path),
            config::Purpose::Serve,
        ) {
            Ok(l) => l,
            Err(errors) => {
                for e in &errors {
                    log::error!("reload: {e}");
                }
                log::error!(
                    "reload refused ({} problem(s)); serving on with the running configuration",
                    errors.len()
                );
                crate::observe::metrics::config_reload("refused");
                return;
            }
        };
        let old = self.live.current();
        let openapi = bytes::Bytes::from(loaded.openapi().to_string());
        let changed = changes(&old.config.app, &loaded.app.app);
        let routes = loaded.matcher.routes().len();
        let state = match reloaded_state(&old, loaded.app, loaded.matcher, openapi) {
            Ok(s) => Arc::new(s),
            Err(e) => {
                log::error!("reload refused: {e}; serving on with the running configuration");
                crate::observe::metrics::config_reload("refused");
                return;
            }
        };
        pools::health::round(
            &upstream::UpstreamClient::default(),
            &state.pools,
            &self.health,
        )
        .await;
        self.health_pools.store(state.pools.clone());
        self.live.replace(state);
        crate::observe::metrics::config_reload("ok");
        log::warn!(
            "configuration reloaded from {} ({routes} routes); {}",
            self.app_path.display(),
            changed.describe()
        );
    }
}

/// Pingora's shutdown signals, and SIGHUP (reload) between them.
pub struct Signals(pub Reloader);

#[async_trait]
impl ShutdownSignalWatch for Signals {
    async fn recv(&self) -> ShutdownSignal {
        let (Ok(mut quit), Ok(mut term), Ok(mut int), Ok(mut hup)) = (
            signal(SignalKind::quit()),
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
            signal(SignalKind::hangup()),
        ) else {
            log::error!("signals: cannot listen for signals; stopping");
            return ShutdownSignal::GracefulTerminate;
        };
        loop {
            tokio::select! {
                _ = quit.recv() => return ShutdownSignal::GracefulUpgrade,
                _ = term.recv() => return ShutdownSignal::GracefulTerminate,
                _ = int.recv() => return ShutdownSignal::FastShutdown,
                _ = hup.recv() => self.0.reload().await,
            }
        }
    }
}

/// SIGHUP ignored until `Signals` listens for it: by default it would end the process.
pub fn ignore_hangup_until_listening() {
    // SAFETY: installs the SIG_IGN disposition for one signal; no handler code runs.
    unsafe {
        libc::signal(libc::SIGHUP, libc::SIG_IGN);
    }
}

/// What a reload changed, by when it takes effect.
#[derive(Debug, PartialEq)]
pub(crate) struct Changes {
    /// Applied to the next request: routes, plans, limits, pools, the method table and
    /// RPC settings, compute units, admin's token and loopback rule.
    pub now: Vec<&'static str>,
    /// Kept as the process started until the next upgrade (`-u`) or restart: listeners,
    /// the store, the cluster link, background capture, the console, key caching.
    pub at_restart: Vec<&'static str>,
}

/// Settings a reload cannot apply in place.
const AT_RESTART: &[&str] = &[
    "listen",
    "metrics",
    "admin.listen",
    "store",
    "cluster",
    "threads",
    "console",
    "auth",
    "usage",
    "tx_tracking",
    "health",
    "index",
    "mempool",
    "solana",
    "streams",
    "metrics_mirror",
];

/// Every setting a reload compares, by name, as text.
fn settings(c: &config::AppConfig) -> Vec<(&'static str, String)> {
    macro_rules! each {
        ($($name:literal => $value:expr),* $(,)?) => {
            vec![$(($name, format!("{:?}", $value))),*]
        };
    }
    each![
        "plugins" => c.plugins, "listen" => c.listen, "metrics" => c.metrics,
        "console" => c.console, "admin.token" => c.admin.token,
        "admin.allow_loopback" => c.admin.allow_loopback, "admin.listen" => c.admin.listen,
        "store" => c.store, "cluster" => c.cluster, "plans" => c.plans,
        "upgrade_url" => c.upgrade_url, "switches" => c.switches, "base_mode" => c.base_mode,
        "auth" => c.auth, "rpc" => c.rpc, "limits" => c.limits,
        "compute_units" => c.compute_units, "usage" => c.usage, "tx_tracking" => c.tx_tracking,
        "health" => c.health, "metrics_mirror" => c.metrics_mirror, "streams" => c.streams,
        "pools" => c.pools, "index" => c.index, "mempool" => c.mempool, "solana" => c.solana,
        "threads" => c.threads,
    ]
}

/// What differs between the running configuration and the reloaded one.
pub(crate) fn changes(old: &config::AppConfig, new: &config::AppConfig) -> Changes {
    let mut out = Changes {
        now: Vec::new(),
        at_restart: Vec::new(),
    };
    for ((name, a), (_, b)) in settings(old).into_iter().zip(settings(new)) {
        if a == b {
            continue;
        }
        if AT_RESTART.contains(&name) {
            out.at_restart.push(name);
        } else {
            out.now.push(name);
        }
    }
    out
}

impl Changes {
    /// One clause for the reload's log line.
    fn describe(&self) -> String {
        let list = |v: &[&str]| {
            if v.is_empty() {
                "nothing".to_string()
            } else {
                v.join(", ")
            }
        };
        if self.at_restart.is_empty() {
            format!("applied now: {}", list(&self.now))
        } else {
            format!(
                "applied now: {}; kept until the next upgrade (-u) or restart: {}",
                list(&self.now),
                list(&self.at_restart)
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app(admin: &str, listen: &str) -> config::AppConfig {
        let text = format!(
            "plugins: plugins\nlisten:\n  http: [\"{listen}\"]\nmetrics:\n  listen: \"127.0.0.1:9090\"\nstore:\n  path: x.db\n\
             plans: [free]\nadmin:\n{admin}"
        );
        config::parse_yaml(&text).expect("parses")
    }

    #[test]
    fn a_reload_says_what_it_applied_and_what_waits() {
        let old = app("  allow_loopback: true\n", "127.0.0.1:8080");
        let same = changes(&old, &app("  allow_loopback: true\n", "127.0.0.1:8080"));
        assert_eq!(same.describe(), "applied now: nothing");
        // Admin's token and loopback rule are read per request: applied at once.
        let admin = app(
            "  allow_loopback: false\n  token: env:T\n",
            "127.0.0.1:8080",
        );
        let c = changes(&old, &admin);
        assert_eq!(c.now, ["admin.token", "admin.allow_loopback"]);
        assert!(c.at_restart.is_empty());
        // Its listener, like every listener, waits.
        let apart = app(
            "  allow_loopback: true\n  listen: \"127.0.0.1:9099\"\n",
            "127.0.0.1:8081",
        );
        let c = changes(&old, &apart);
        assert_eq!(c.at_restart, ["listen", "admin.listen"]);
        assert_eq!(
            c.describe(),
            "applied now: nothing; kept until the next upgrade (-u) or restart: listen, admin.listen"
        );
    }
}
