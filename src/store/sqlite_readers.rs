//! SQLite's read-only connections, each on a thread of its own, taking reads from one
//! queue. Under load a reader goes from one read to the next without sleeping, and the
//! caller's task is woken once, when its answer is ready: no blocking-pool task and no
//! semaphore per read (that hand-off, two thread switches a read, was a third of a wallet
//! page's time). A read never runs on a worker thread: a page cold on disk stalls one
//! reader, never the connections of the proxy.

use super::sql::{ErrorKind, Result, StoreError};
use rusqlite::Connection;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};

/// Reads waiting for a reader, at most: past it a read is refused (503 upstream of here)
/// rather than queued without end behind a stalled disk.
const MAX_WAITING: usize = 4096;

type Job = Box<dyn FnOnce(&Connection) + Send>;

#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    /// Readers asleep on the condition variable: woken only when there are some.
    asleep: usize,
    closed: bool,
}

type Shared = Arc<(Mutex<Queue>, Condvar)>;

pub(super) struct Readers {
    shared: Shared,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Readers {
    /// One thread per connection; the threads end when the readers are dropped.
    pub fn start(connections: Vec<Connection>) -> Result<Readers> {
        let shared: Shared = Arc::default();
        let mut threads = Vec::with_capacity(connections.len());
        for (i, conn) in connections.into_iter().enumerate() {
            let shared = shared.clone();
            let thread = std::thread::Builder::new()
                .name(format!("sqlite-read-{i}"))
                .spawn(move || serve(&shared, &conn))
                .map_err(|e| StoreError::other(format!("sqlite reader thread: {e}")))?;
            threads.push(thread);
        }
        Ok(Readers { shared, threads })
    }

    /// Run `f` on the next free reader.
    pub async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let wake = {
            let mut q = self.lock()?;
            if q.jobs.len() >= MAX_WAITING {
                return Err(StoreError {
                    kind: ErrorKind::Unavailable,
                    message: "sqlite: every reader is busy".into(),
                });
            }
            q.jobs.push_back(Box::new(move |c| {
                // The caller may have gone (its request ended): the answer is dropped.
                let _ = answer.send(f(c));
            }));
            q.asleep > 0
        };
        if wake {
            self.shared.1.notify_one();
        }
        answered
            .await
            .map_err(|_| StoreError::other("sqlite reader ended"))?
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Queue>> {
        self.shared
            .0
            .lock()
            .map_err(|_| StoreError::other("sqlite readers' queue poisoned"))
    }
}

/// The threads finish the reads queued, then end, closing their connections: the
/// writer, closed after them, is then the file's last connection and checkpoints the
/// WAL into the database file (what a copy of the file alone must hold).
impl Drop for Readers {
    fn drop(&mut self) {
        if let Ok(mut q) = self.shared.0.lock() {
            q.closed = true;
        }
        self.shared.1.notify_all();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// How long a reader that found no read looks again before it sleeps. Under load the
/// next read comes within microseconds, sooner than a sleep on the condition variable and
/// the wake-up that ends it (a futex call each side and a switch of threads: measured, a
/// wallet page cost 10-15% less CPU with it). Yielding, so a reader looking never holds a
/// core another thread wants.
const LOOK_BEFORE_SLEEPING: std::time::Duration = std::time::Duration::from_micros(50);

fn look_before_sleeping(queue: &Mutex<Queue>) {
    let since = std::time::Instant::now();
    while since.elapsed() < LOOK_BEFORE_SLEEPING {
        match queue.lock() {
            Ok(q) if q.jobs.is_empty() && !q.closed => {}
            _ => return,
        }
        std::thread::yield_now();
    }
}

/// A reader's life: the next read, or sleep until there is one.
fn serve(shared: &Shared, conn: &Connection) {
    let (queue, wake) = &**shared;
    loop {
        look_before_sleeping(queue);
        let job = {
            let Ok(mut q) = queue.lock() else { return };
            loop {
                if let Some(job) = q.jobs.pop_front() {
                    break job;
                }
                if q.closed {
                    return;
                }
                q.asleep += 1;
                q = match wake.wait(q) {
                    Ok(q) => q,
                    Err(_) => return,
                };
                q.asleep -= 1;
            }
        };
        job(conn);
    }
}
