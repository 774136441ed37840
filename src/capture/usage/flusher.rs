//! From the in-memory table to the store, through the journal.
//!
//! - The journal thread (its own OS thread: file writes never run on a proxy runtime)
//!   drains the table every journal interval, appends the rows as one batch, and adds
//!   them to the ledger: the journaled counts not yet in the store, summed.
//! - The flusher (a background service) takes the ledger as one snapshot every flush
//!   interval and adds it to the store with the journal's cursor in one transaction. A
//!   snapshot whose write failed stays "in doubt" and is retried as it is: if the first
//!   try committed after all, the cursor says so and nothing is added twice.
//! - At start, and every round, journals left by processes that are gone are replayed.
//! - `finish`, after the server has stopped serving, journals and flushes the rest.

use super::journal::{self, Journal};
use crate::capture::{Health, Producer};
use crate::observe::metrics;
use crate::store::usage::{Counts, Journaled, UsageRow};
use crate::store::Store;
use crate::usage::{rows_of, Usage};
use async_trait::async_trait;
use pingora_core::server::ShutdownWatch;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A snapshot of the ledger, as one store write: batches `from..=to`.
#[derive(Clone)]
struct Snapshot {
    rows: Vec<UsageRow>,
    from: u64,
    to: u64,
}

/// Journaled counts not yet in the store.
#[derive(Default)]
struct Ledger {
    sums: HashMap<(String, i64), (String, Counts)>,
    /// Batches in `sums` (0, 0 when empty).
    from: u64,
    to: u64,
    /// Taken for a store write that has not been seen to commit.
    in_doubt: Option<Snapshot>,
    /// The last batch known to be in the store.
    committed: u64,
}

impl Ledger {
    fn add(&mut self, rows: Vec<UsageRow>, seq: u64) {
        for r in rows {
            self.sums
                .entry((r.key_id, r.minute))
                .or_insert((r.tenant_id, Counts::default()))
                .1
                .add(&r.counts);
        }
        if self.from == 0 {
            self.from = seq;
        }
        self.to = seq;
    }

    /// The snapshot to write next: the one in doubt, else everything summed so far.
    fn next(&mut self) -> Option<Snapshot> {
        if self.in_doubt.is_none() && self.to != 0 {
            let rows = rows_of(std::mem::take(&mut self.sums));
            self.in_doubt = Some(Snapshot {
                rows,
                from: self.from,
                to: self.to,
            });
            (self.from, self.to) = (0, 0);
        }
        self.in_doubt.clone()
    }

    fn is_empty(&self) -> bool {
        self.in_doubt.is_none() && self.to == 0
    }
}

/// The journal thread's handle: its stop flag, and the thread (which hands the journal
/// back when it ends).
struct Writer {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Journal>,
}

/// Per-key usage kept from the table to the store, across crashes and stops.
pub struct Durable {
    usage: Arc<Usage>,
    store: Store,
    /// `<state_dir>/usage-journal`.
    root: PathBuf,
    journal_id: String,
    /// The journal until its thread starts (after Pingora has daemonised).
    journal: Mutex<Option<Journal>>,
    writer: Mutex<Option<Writer>>,
    ledger: Mutex<Ledger>,
    journal_interval: Duration,
    /// Key-minutes the ledger holds at most (a store down for long): past it the table
    /// keeps the counts, and itself drops new keys' counts when full.
    max_ledger: usize,
    /// Appends are failing (a full disk): warned once, not every interval.
    append_failing: AtomicBool,
}

impl Durable {
    /// This process's journal under `state_dir`: created now, so a directory that
    /// cannot be written stops the start with the reason.
    pub fn open(
        usage: Arc<Usage>,
        store: Store,
        state_dir: &Path,
        journal_interval: Duration,
        max_ledger: usize,
    ) -> Result<Arc<Durable>, String> {
        let root = state_dir.join(journal::DIR);
        let journal = Journal::create(&root)
            .map_err(|e| format!("usage journal in {}: {e}", root.display()))?;
        Ok(Arc::new(Durable {
            usage,
            store,
            root,
            journal_id: journal.id().to_string(),
            journal: Mutex::new(Some(journal)),
            writer: Mutex::new(None),
            ledger: Mutex::new(Ledger::default()),
            journal_interval,
            max_ledger: max_ledger.max(1),
            append_failing: AtomicBool::new(false),
        }))
    }

    /// Start the journal thread (once).
    fn start_writer(self: &Arc<Self>) {
        let Some(mut journal) = self.journal.lock().ok().and_then(|mut j| j.take()) else {
            return;
        };
        let stop = Arc::new(AtomicBool::new(false));
        let me = self.clone();
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("usage-journal".into())
            .spawn(move || {
                let mut seen_committed = 0;
                loop {
                    let last = stopping.load(Ordering::Acquire);
                    me.journal_once(&mut journal);
                    let committed = me.ledger.lock().map(|l| l.committed).unwrap_or(0);
                    if committed > seen_committed {
                        if let Err(e) = journal.committed(committed) {
                            log::warn!("usage journal: dropping flushed segments: {e}");
                        }
                        seen_committed = committed;
                    }
                    if last {
                        return journal;
                    }
                    std::thread::park_timeout(me.journal_interval);
                }
            })
            .expect("spawn the usage journal thread");
        if let Ok(mut w) = self.writer.lock() {
            *w = Some(Writer { stop, thread });
        }
    }

    /// Move the table's counts to the journal and the ledger.
    fn journal_once(&self, journal: &mut Journal) {
        if self.ledger.lock().map(|l| l.sums.len()).unwrap_or(0) >= self.max_ledger {
            return;
        }
        let rows = self.usage.drain();
        if rows.is_empty() {
            return;
        }
        let at_ms = crate::clock::now_ms();
        match journal.append(&rows, at_ms) {
            Ok(seq) => {
                if let Ok(mut l) = self.ledger.lock() {
                    l.add(rows, seq);
                }
                if self.append_failing.swap(false, Ordering::Relaxed) {
                    log::warn!("usage journal: appends work again");
                }
            }
            Err(e) => {
                // Once per outage: a full disk would otherwise log every interval.
                if !self.append_failing.swap(true, Ordering::Relaxed) {
                    log::warn!(
                        "usage journal: append failed, counts kept in memory and retried every interval (chainedge_usage_journal_errors_total counts each): {e}"
                    );
                }
                metrics::usage_journal_error();
                self.usage.restore(rows);
            }
        }
    }

    /// Write what the ledger holds to the store; whether it is empty after, or why the
    /// store did not take it (it is kept for the next round).
    async fn flush(&self) -> Result<bool, String> {
        // The snapshot in doubt first, then what gathered meanwhile.
        for _ in 0..2 {
            let Some(snap) = self.ledger.lock().ok().and_then(|mut l| l.next()) else {
                break;
            };
            match self
                .store
                .record_journaled_usage(&snap.rows, &self.journal_id, snap.from, snap.to)
                .await
            {
                Ok(outcome) => {
                    let n = if outcome == Journaled::Written {
                        snap.rows.len()
                    } else {
                        0
                    };
                    metrics::usage_flush("ok", n);
                    if let Ok(mut l) = self.ledger.lock() {
                        l.in_doubt = None;
                        l.committed = snap.to;
                    }
                    if let Ok(w) = self.writer.lock() {
                        if let Some(w) = w.as_ref() {
                            w.thread.thread().unpark();
                        }
                    }
                }
                Err(e) => {
                    metrics::usage_flush("error", 0);
                    metrics::usage_pending(self.usage.pending_keys());
                    return Err(format!(
                        "flush of {} rows failed, kept for the next round: {e}",
                        snap.rows.len()
                    ));
                }
            }
        }
        metrics::usage_pending(self.usage.pending_keys());
        Ok(self.ledger.lock().map(|l| l.is_empty()).unwrap_or(false))
    }

    /// Add the journals of processes that are gone to the store, and remove them.
    async fn replay_orphans(&self) {
        for orphan in journal::orphans(&self.root) {
            if orphan.id == self.journal_id {
                continue;
            }
            if let Err(e) = self.replay(&orphan).await {
                log::warn!(
                    "usage journal {}: replay failed, retried later: {e}",
                    orphan.id
                );
                continue;
            }
            let id = orphan.id.clone();
            if let Err(e) = orphan.remove() {
                log::warn!("usage journal {id}: replayed but not removed: {e}");
                continue;
            }
            if let Err(e) = self.store.forget_journal(&id).await {
                log::warn!("usage journal {id}: cursor kept: {e}");
            }
        }
    }

    async fn replay(&self, orphan: &journal::Orphan) -> Result<(), String> {
        let cursor = self
            .store
            .journal_cursor(&orphan.id)
            .await
            .map_err(|e| e.to_string())?;
        let found = orphan.read_after(cursor).map_err(|e| e.to_string())?;
        if found.last == 0 {
            return Ok(());
        }
        let calls: i64 = found.rows.iter().map(|r| r.counts.calls).sum();
        self.store
            .record_journaled_usage(&found.rows, &orphan.id, found.first, found.last)
            .await
            .map_err(|e| e.to_string())?;
        metrics::usage_recovered(calls.max(0) as u64);
        log::warn!(
            "usage: added {calls} calls from the journal of an instance that stopped without \
             flushing them (journal {}, batches {}..={}, last written at {}{}); counts it \
             gathered after that last write, at most one journal interval, are lost",
            orphan.id,
            found.first,
            found.last,
            humantime::format_rfc3339_millis(
                std::time::UNIX_EPOCH + Duration::from_millis(found.last_at_ms.max(0) as u64)
            ),
            if found.torn {
                ", its last batch cut short"
            } else {
                ""
            },
        );
        Ok(())
    }

    /// After the server has stopped serving: journal the last counts, write the ledger
    /// to the store, and remove the journal when all of it is in. What the store does
    /// not take (it is down) stays in the journal for the next start.
    pub fn finish(&self) {
        let writer = self.writer.lock().ok().and_then(|mut w| w.take());
        let journal = match writer {
            Some(w) => {
                w.stop.store(true, Ordering::Release);
                w.thread.thread().unpark();
                w.thread.join().ok()
            }
            // Never started (the server stopped before its services did).
            None => self
                .journal
                .lock()
                .ok()
                .and_then(|mut j| j.take())
                .map(|mut j| {
                    self.journal_once(&mut j);
                    j
                }),
        };
        let Some(journal) = journal else {
            return;
        };
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                log::error!("usage: final flush: {e}; the journal keeps the counts");
                return;
            }
        };
        let all_in = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(10), async {
                let mut all_in = self.flush().await.unwrap_or(false);
                if !all_in {
                    all_in = self.flush().await.unwrap_or(false);
                }
                all_in
            })
            .await
            .unwrap_or(false)
        });
        if all_in {
            let id = journal.id().to_string();
            match journal.remove() {
                Ok(()) => {
                    let _ = runtime.block_on(self.store.forget_journal(&id));
                }
                Err(e) => log::warn!("usage journal {id}: flushed but not removed: {e}"),
            }
        } else {
            log::warn!(
                "usage: the store did not take the last counts; they stay in {} and the \
                 next instance to start there adds them",
                self.root.display()
            );
        }
    }
}

/// The background service: replay orphans, then flush every interval (and once at the
/// shutdown signal), prune hourly.
pub struct Flusher {
    pub durable: Arc<Durable>,
    pub interval: Duration,
    pub minute_retention: Duration,
    pub hour_retention: Duration,
}

impl Flusher {
    async fn prune(&self) {
        let now = crate::clock::now();
        let minutes_before = now - self.minute_retention.as_secs() as i64;
        let hours_before = now - self.hour_retention.as_secs() as i64;
        if let Err(e) = self
            .durable
            .store
            .prune_usage(minutes_before, hours_before)
            .await
        {
            log::warn!("usage: pruning failed: {e}");
        }
        // The breakdown answers up to 30 days back.
        let slots_before = now - crate::usage::breakdown::KEPT_SECS;
        if let Err(e) = self.durable.store.prune_method_usage(slots_before).await {
            log::warn!("usage: pruning the method breakdown failed: {e}");
        }
    }
}

#[async_trait]
impl Producer for Flusher {
    fn name(&self) -> String {
        "usage".into()
    }

    async fn run(&self, health: &Health, mut shutdown: ShutdownWatch) {
        self.durable.start_writer();
        self.durable.replay_orphans().await;
        let mut tick = tokio::time::interval(self.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut pruned_at = 0i64;
        loop {
            let stopping = tokio::select! {
                _ = tick.tick() => false,
                _ = shutdown.changed() => true,
            };
            health.round(self.durable.flush().await.map(drop));
            if stopping {
                return;
            }
            self.durable.replay_orphans().await;
            if crate::clock::now() - pruned_at >= 3600 {
                self.prune().await;
                pruned_at = crate::clock::now();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, calls: i64) -> UsageRow {
        UsageRow {
            key_id: key.into(),
            tenant_id: "t".into(),
            minute: 60,
            counts: Counts {
                calls,
                ..Counts::default()
            },
        }
    }

    #[test]
    fn a_snapshot_in_doubt_is_retried_as_it_was() {
        let mut l = Ledger::default();
        l.add(vec![row("a", 1)], 1);
        l.add(vec![row("a", 2)], 2);
        let first = l.next().unwrap();
        assert_eq!(
            (first.from, first.to, first.rows[0].counts.calls),
            (1, 2, 3)
        );
        // More arrives while the write is in doubt: the retry is the same snapshot.
        l.add(vec![row("a", 4)], 3);
        let again = l.next().unwrap();
        assert_eq!(
            (again.from, again.to, again.rows[0].counts.calls),
            (1, 2, 3)
        );
        l.in_doubt = None;
        let next = l.next().unwrap();
        assert_eq!((next.from, next.to, next.rows[0].counts.calls), (3, 3, 4));
        l.in_doubt = None;
        assert!(l.is_empty() && l.next().is_none());
    }
}
