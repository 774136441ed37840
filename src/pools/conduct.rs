//! A host's record of answers the edge disproved: each one sets it aside like a failed
//! call; `CORDON_AFTER` of them within `WINDOW` cordon it (tried only when no other host
//! can answer) for `CORDON`.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

const CORDON_AFTER: u32 = 3;
const WINDOW: Duration = Duration::from_secs(600);
const CORDON: Duration = Duration::from_secs(300);

#[derive(Default)]
pub struct Conduct {
    /// Disproved answers since `window_began_ms`.
    disproved: AtomicU32,
    window_began_ms: AtomicU64,
    cordoned_until_ms: AtomicU64,
}

impl Conduct {
    /// One disproved answer; true when it cordons the host (just now).
    pub fn disproved(&self) -> bool {
        let now = super::now_ms();
        let began = self.window_began_ms.load(Ordering::Relaxed);
        if now.saturating_sub(began) > WINDOW.as_millis() as u64 {
            self.window_began_ms.store(now, Ordering::Relaxed);
            self.disproved.store(0, Ordering::Relaxed);
        }
        let n = self.disproved.fetch_add(1, Ordering::Relaxed) + 1;
        if n < CORDON_AFTER || self.cordoned() {
            return false;
        }
        self.cordoned_until_ms
            .store(now + CORDON.as_millis() as u64, Ordering::Relaxed);
        true
    }

    pub fn cordoned(&self) -> bool {
        // 0: never cordoned (`now_ms` starts at 1); no clock read per candidate list.
        let until = self.cordoned_until_ms.load(Ordering::Relaxed);
        until != 0 && super::now_ms() < until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_disproved_answers_cordon_a_host() {
        let c = Conduct::default();
        assert!(!c.disproved());
        assert!(!c.disproved());
        assert!(!c.cordoned());
        assert!(c.disproved(), "the third cordons");
        assert!(c.cordoned());
        assert!(!c.disproved(), "already cordoned: said once");
    }
}
