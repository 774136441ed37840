//! The Solana watchlist's push service: the node link (`upstream.rs`, one
//! `accountSubscribe` per watched account and commitment), the registry's
//! reconciliation with the store every `RECONCILE`, and each change handed to the
//! registry's delivery (`state::sol_watch`, which describes the deliveries).

pub mod upstream;

use crate::capture::{Health, Producer};
use crate::state::sol_watch::{SolWatch, RECONCILE};
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use std::sync::Arc;
use tokio::sync::mpsc;

/// The push service: the node link, the registry's reconciliation, the dispatcher.
pub struct Push(pub Arc<SolWatch>);

#[async_trait]
impl Producer for Push {
    fn name(&self) -> String {
        "sol/watch".into()
    }

    async fn run(&self, health: &Health, mut shutdown: ShutdownWatch) {
        let watch = self.0.clone();
        let Some(commands) = watch.take_commands() else {
            return;
        };
        let (changes_tx, mut changes) = mpsc::channel(1024);
        let driver = upstream::Driver {
            pools: watch.pools().clone(),
            gateway: watch.gateway().clone(),
            commands,
            changes: changes_tx,
        };
        let link = tokio::spawn(driver.run());
        health.round(watch.reconcile().await);
        let mut tick = tokio::time::interval(RECONCILE);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => health.round(watch.reconcile().await),
                change = changes.recv() => match change {
                    Some(c) => watch.dispatch(c),
                    None => break,
                },
                _ = shutdown.changed() => break,
            }
        }
        link.abort();
    }
}
