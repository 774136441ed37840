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

use super::{load, needs_restart, reloaded_state};
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
        let restart = needs_restart(&old.config.app, &loaded.app.app);
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
        if restart.is_empty() {
            log::warn!(
                "configuration reloaded from {} ({routes} routes)",
                self.app_path.display()
            );
        } else {
            log::warn!(
                "configuration reloaded from {} ({routes} routes); changes to {} take effect at \
                 the next upgrade (-u) or restart",
                self.app_path.display(),
                restart.join(", ")
            );
        }
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
