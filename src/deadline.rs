//! Timeouts that cost nothing per operation on a busy connection.
//!
//! `tokio::time::timeout` registers a timer in the runtime's wheel (under its lock) for
//! every pending read and removes it again when the read completes: twice per proxied
//! request. A `Deadline` belongs to one connection and keeps one timer. An operation
//! that wants to end later than the timer is armed for leaves it alone; when the timer
//! fires early it is moved to the operation's real limit and waiting goes on. On a busy
//! keep-alive connection the timer is touched about once per limit (60 s), not per read.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// A request body must arrive within this plus its length at `MIN_BODY_RATE`.
pub const BODY_TIMEOUT: Duration = Duration::from_secs(10);
/// Slowest body upload accepted, in bytes per second.
pub const MIN_BODY_RATE: u64 = 64 * 1024;

/// How long a request body of `len` bytes may take to arrive (whichever server reads
/// it; a body of unknown length is held to it by the bytes that arrived so far).
pub fn body_deadline(len: usize) -> Duration {
    BODY_TIMEOUT + Duration::from_secs(len as u64 / MIN_BODY_RATE)
}

#[derive(Default)]
pub struct Deadline {
    timer: Option<Pin<Box<Sleep>>>,
}

impl Deadline {
    /// `op`, or `TimedOut` if it has not finished `limit` from now (no limit: `None`).
    pub async fn run<T, F>(&mut self, limit: Option<Duration>, mut op: F) -> io::Result<T>
    where
        F: Future<Output = io::Result<T>>,
    {
        // Pinned where it was passed, not moved into a second local: an async fn's state
        // keeps a moved-from argument's room, and these nest (a connection's idle wait is
        // two of them).
        // SAFETY: the argument is never moved again: it lives in this future's state,
        // which is pinned while polled, until it is dropped.
        let mut op = unsafe { Pin::new_unchecked(&mut op) };
        let Some(limit) = limit else {
            return op.await;
        };
        let until = Instant::now() + limit;
        let timer = match &mut self.timer {
            Some(timer) => {
                // Armed for later than this operation allows: bring it forward.
                if timer.deadline() > until {
                    timer.as_mut().reset(until);
                }
                timer
            }
            None => self.timer.insert(Box::pin(tokio::time::sleep_until(until))),
        };
        loop {
            tokio::select! {
                biased;
                done = &mut op => return done,
                () = timer.as_mut() => {
                    if Instant::now() >= until {
                        return Err(io::ErrorKind::TimedOut.into());
                    }
                    // Armed by an earlier operation: move it to this one's limit.
                    timer.as_mut().reset(until);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Deadline;
    use std::time::Duration;

    /// How long an operation that never ends waits under `limit` before `TimedOut`.
    async fn waited_before_timeout(d: &mut Deadline, limit: u64) -> Duration {
        let start = tokio::time::Instant::now();
        let never = std::future::pending::<std::io::Result<()>>();
        let e = d.run(Some(Duration::from_secs(limit)), never).await;
        assert_eq!(e.unwrap_err().kind(), std::io::ErrorKind::TimedOut);
        start.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn times_out_at_each_operations_own_limit() {
        let mut d = Deadline::default();
        // The first operation arms the timer for 10 s.
        let fast = d.run(Some(Duration::from_secs(10)), async { Ok(1) }).await;
        assert_eq!(fast.unwrap(), 1);
        // 8 s later a 10 s operation must not end when the old timer fires (at 10 s)...
        tokio::time::advance(Duration::from_secs(8)).await;
        assert_eq!(
            waited_before_timeout(&mut d, 10).await,
            Duration::from_secs(10)
        );
        // ...and a shorter limit than the timer's brings it forward.
        d.run(Some(Duration::from_secs(60)), async { Ok(()) })
            .await
            .unwrap();
        assert_eq!(
            waited_before_timeout(&mut d, 1).await,
            Duration::from_secs(1)
        );
        // No limit: waits for the operation however long it takes.
        let slow = async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            Ok(7)
        };
        assert_eq!(d.run(None, slow).await.unwrap(), 7);
    }
}
