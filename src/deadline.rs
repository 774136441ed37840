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
use std::task::{Context, Poll};
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
    /// The end of the operation running now (`Run`'s, kept here so that `Run` is two
    /// references: it nests in every idle connection's task).
    until: Option<Instant>,
}

impl Deadline {
    /// `op`, or `TimedOut` if it has not finished `limit` from now (no limit: `None`).
    /// The timer is armed (or brought forward) here, when the operation is made.
    pub fn run<T, F>(&mut self, limit: Option<Duration>, op: F) -> Run<'_, F>
    where
        F: Future<Output = io::Result<T>>,
    {
        self.run_until(limit.map(|limit| Instant::now() + limit), op)
    }

    /// `op`, or `TimedOut` if it has not finished by `until` (no end: `None`).
    pub fn run_until<T, F>(&mut self, until: Option<Instant>, op: F) -> Run<'_, F>
    where
        F: Future<Output = io::Result<T>>,
    {
        if let Some(until) = until {
            match &mut self.timer {
                // Armed for later than this operation allows: bring it forward.
                Some(timer) if timer.deadline() > until => timer.as_mut().reset(until),
                Some(_) => {}
                None => self.timer = Some(Box::pin(tokio::time::sleep_until(until))),
            }
        }
        self.until = until;
        Run { op, deadline: self }
    }
}

pin_project_lite::pin_project! {
    /// `Deadline::run`'s future: the operation and its limit, nothing else. Written by
    /// hand rather than as an `async fn`, whose state keeps room for its argument twice
    /// (rust-lang/rust#62958); these nest in every connection's idle wait, which is what
    /// an idle keep-alive connection's task holds.
    pub struct Run<'a, F> {
        #[pin]
        op: F,
        deadline: &'a mut Deadline,
    }
}

impl<T, F> Future for Run<'_, F>
where
    F: Future<Output = io::Result<T>>,
{
    type Output = io::Result<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let this = self.project();
        if let Poll::Ready(done) = this.op.poll(cx) {
            return Poll::Ready(done);
        }
        let Deadline { timer, until } = &mut **this.deadline;
        let (Some(until), Some(timer)) = (*until, timer.as_mut()) else {
            return Poll::Pending;
        };
        while timer.as_mut().poll(cx).is_ready() {
            if Instant::now() >= until {
                return Poll::Ready(Err(io::ErrorKind::TimedOut.into()));
            }
            // Armed by an earlier operation: move it to this one's limit (and poll it
            // again, so it wakes this task).
            timer.as_mut().reset(until);
        }
        Poll::Pending
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
