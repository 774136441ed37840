//! Reads outside a transaction on PostgreSQL: a few connections per thread, shared by
//! every read that thread makes, instead of a pooled connection held by each read.
//!
//! A pooled read hopped threads twice (from the worker to the store's runtime, where the
//! pool's connections live, and back) and its connection's backend slept between reads:
//! under load a third of the edge's time on a wallet page was the kernel switching and
//! waking threads. Here the connection's task runs on the runtime of the thread that
//! opened it, and reads sent at once on one connection are pipelined by tokio-postgres:
//! one write carries several, and the backend answers them back to back.
//!
//! `PER_THREAD` connections per thread and store, each read on the one with the fewest
//! reads in flight: a slow read holds up only the reads queued behind it on its own
//! connection while the other takes the new ones. Only threads that read open them:
//! the workers and the background services.

use super::sql::{Result, StoreError, Value};
use deadpool_postgres::ClientWrapper;
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use tokio::sync::OnceCell;

/// Connections per thread and store.
const PER_THREAD: usize = 2;

/// One store's read connections, reached per thread.
pub(super) struct ReadConns {
    config: tokio_postgres::Config,
    /// Held while the store is: a thread drops the connections of stores gone. Its
    /// address tells this store's connections from another's on one thread (tests open
    /// several stores in one process); a thread's `Weak` keeps it from being reused.
    alive: Arc<()>,
}

struct ReadConn {
    client: ClientWrapper,
    in_flight: AtomicUsize,
}

type Slot = Arc<OnceCell<Arc<ReadConn>>>;

struct ThreadSlots {
    /// The process that opened them: after a fork (`-d`) the parent's connections are
    /// not this process's to use, nor to close.
    pid: u32,
    store: Weak<()>,
    slots: Vec<Slot>,
}

thread_local! {
    static SLOTS: RefCell<HashMap<usize, ThreadSlots>> = RefCell::new(HashMap::new());
}

/// On a store new to this thread: the connections of stores dropped since close here
/// (their tasks end with them); a parent's are left alone.
fn drop_gone_stores(slots: &mut HashMap<usize, ThreadSlots>, pid: u32) {
    slots.retain(|_, t| {
        let alive = t.store.strong_count() > 0;
        if !alive && t.pid != pid {
            std::mem::forget(std::mem::take(&mut t.slots));
        }
        alive
    });
}

/// Counts a read in flight on its connection until dropped.
struct InFlight(Arc<ReadConn>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl ReadConns {
    pub fn new(config: tokio_postgres::Config) -> ReadConns {
        ReadConns {
            config,
            alive: Arc::new(()),
        }
    }

    /// `sql` with `params` on one of this thread's read connections (opened now if need
    /// be), its statement prepared once per connection.
    pub async fn query(&self, sql: &str, params: &[Value]) -> Result<Vec<tokio_postgres::Row>> {
        match self.query_once(sql, params).await {
            // The server closed the connection before this read (it restarted, or ended
            // the backend): once more, on a connection opened now. A read can be repeated.
            Err((_, Some(conn))) if conn.client.is_closed() => {
                self.query_once(sql, params).await.map_err(|(e, _)| e)
            }
            result => result.map_err(|(e, _)| e),
        }
    }

    /// One try; a failure names the connection it was on, if one was open.
    async fn query_once(
        &self,
        sql: &str,
        params: &[Value],
    ) -> std::result::Result<Vec<tokio_postgres::Row>, (StoreError, Option<Arc<ReadConn>>)> {
        let slot = self.slot();
        let conn = match slot.get_or_try_init(|| self.open()).await {
            Ok(conn) => conn.clone(),
            Err(e) => return Err((e, None)),
        };
        conn.in_flight.fetch_add(1, Ordering::Relaxed);
        let busy = InFlight(conn);
        super::postgres_wire::query_rows(&busy.0.client, sql, params)
            .await
            .map_err(|e| (e, Some(busy.0.clone())))
    }

    /// The slot to read on: the open connection with the fewest reads in flight, or a
    /// slot not opened yet when every open one is busy (or none is open). A closed
    /// connection's slot is emptied, to be opened again.
    fn slot(&self) -> Slot {
        let pid = std::process::id();
        SLOTS.with(|slots| {
            let mut slots = slots.borrow_mut();
            let id = Arc::as_ptr(&self.alive) as usize;
            if !slots.contains_key(&id) {
                drop_gone_stores(&mut slots, pid);
            }
            let mine = slots.entry(id).or_insert_with(|| ThreadSlots {
                pid,
                store: Arc::downgrade(&self.alive),
                slots: Vec::new(),
            });
            if mine.pid != pid {
                // The parent's connections: their tasks died with its runtime threads.
                std::mem::forget(std::mem::take(&mut mine.slots));
                mine.pid = pid;
            }
            if mine.slots.is_empty() {
                mine.slots = (0..PER_THREAD).map(|_| Slot::default()).collect();
            }
            for slot in &mut mine.slots {
                if slot.get().is_some_and(|c| c.client.is_closed()) {
                    *slot = Slot::default();
                }
            }
            let least_busy = mine
                .slots
                .iter()
                .filter_map(|s| s.get().map(|c| (c.in_flight.load(Ordering::Relaxed), s)))
                .min_by_key(|(n, _)| *n);
            let unopened = mine.slots.iter().find(|s| !s.initialized());
            match (least_busy, unopened) {
                (Some((0, s)), _) | (Some((_, s)), None) => s.clone(),
                (_, Some(s)) => s.clone(),
                // Not reached: every slot is open or not.
                (None, None) => mine.slots[0].clone(),
            }
        })
    }

    /// A new connection, its task on this thread's runtime.
    async fn open(&self) -> Result<Arc<ReadConn>> {
        let (client, connection) = self
            .config
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(|e| StoreError::unavailable(format!("postgres: {e}")))?;
        let task = tokio::spawn(async move {
            if let Err(e) = connection.await {
                log::warn!("postgres read connection: {e}");
            }
        });
        Ok(Arc::new(ReadConn {
            client: ClientWrapper::new(client, task),
            in_flight: AtomicUsize::new(0),
        }))
    }
}
