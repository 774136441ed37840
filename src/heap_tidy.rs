//! Freed memory given back to the system once a burst is over.
//!
//! mimalloc returns a page's memory to the system a short delay after the page empties,
//! but only when that thread's heap is used again: a worker thread that served a burst
//! (thousands of requests in flight, then idle keep-alive connections) goes quiet with
//! the burst's pages still resident, which then looks like memory every idle connection
//! holds (bench/idle.sh: 2.0 KiB per idle connection, 84 MB resident, against 1.4 and
//! 55 with the pages given back). Each worker thread runs a small task that asks its
//! heap to do so every `PERIOD`. The binary installs the allocator's call (`install`):
//! the library, also built into tests on the system allocator, knows no allocator.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::sync::watch;

/// How often a worker thread's heap is tidied: rarely enough that its cost (a walk over
/// the thread's pages, tens of microseconds) is nothing, soon enough that a memory
/// reading after a burst sees what is really held.
const PERIOD: Duration = Duration::from_secs(1);

static TIDY: OnceLock<fn()> = OnceLock::new();

thread_local! {
    static STARTED: Cell<bool> = const { Cell::new(false) };
}

/// The call that gives the calling thread's freed pages back (set once, by `main`).
pub fn install(tidy: fn()) {
    let _ = TIDY.set(tidy);
}

/// On a worker thread's runtime: start its tidying task, once per thread, until
/// `shutdown` turns.
pub fn on_this_thread(shutdown: &watch::Receiver<bool>) {
    let Some(&tidy) = TIDY.get() else { return };
    if STARTED.with(|started| started.replace(true)) {
        return;
    }
    let mut shutdown = shutdown.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(PERIOD);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => tidy(),
                _ = shutdown.changed() => return,
            }
        }
    });
}
