//! Sign-in records: one-time email codes (hashed, bounded per address and per client,
//! with a lock-out after wrong guesses) and wallet sign-in challenges (single use).

use super::sql::{params, query_opt, StoreError, Tx};
use super::{now, now_us, Store};

/// Outcome of checking a one-time code.
#[derive(Debug, PartialEq)]
pub enum CodeCheck {
    Ok,
    /// Wrong code; attempts left on the current code.
    Wrong,
    Expired,
    TooManyAttempts,
    /// No code was requested (or all were used).
    NoCode,
    /// The address is locked out for this many more seconds (too many wrong guesses).
    LockedOut(i64),
}

/// Whether a code or challenge was stored, or which bound refused it.
#[derive(Debug, PartialEq)]
pub enum Issued {
    Stored,
    TooManyForAddress,
    TooManyForClient,
}

/// How many codes an address and a client may be sent per `window` seconds.
pub struct CodeBounds {
    pub window: i64,
    pub per_address: i64,
    pub per_client: i64,
}

/// Outstanding challenges per client and per subject.
pub struct ChallengeBounds {
    pub per_client: i64,
    pub per_subject: i64,
}

/// The wrong-guess budget of one email address.
pub struct GuessGuard {
    /// Wrong guesses per code, and per lock-out step.
    pub max_attempts: i64,
    pub lockout_secs: i64,
    pub max_lockout_secs: i64,
    /// Failures older than this are forgotten.
    pub forget_after: i64,
}

/// The guard row counting every client's wrong guesses at an address (client buckets
/// are addresses, /64s or `unknown`: never this).
const ANY_CLIENT: &str = "*";

/// Wrong guesses from all clients together per lock-out step of the whole address, in
/// `max_attempts`: a backstop against guesses spread over many clients, high enough that
/// one stranger's guesses (locked out of the address every `max_attempts`, doubling)
/// take more than a day to reach it.
const ANY_CLIENT_STEP: i64 = 10;

impl GuessGuard {
    /// The lock-out that one client's `failures`-th wrong guess starts, if any: every
    /// `max_attempts`-th failure, doubling from `lockout_secs` up to `max_lockout_secs`.
    pub fn lockout_after(&self, failures: i64) -> Option<i64> {
        self.lockout_every(failures, self.max_attempts)
    }

    /// The lock-out of the whole address that the `failures`-th wrong guess from any
    /// client starts: every `ANY_CLIENT_STEP × max_attempts`-th, doubling likewise.
    pub fn address_lockout_after(&self, failures: i64) -> Option<i64> {
        self.lockout_every(failures, self.max_attempts * ANY_CLIENT_STEP)
    }

    fn lockout_every(&self, failures: i64, every: i64) -> Option<i64> {
        if failures <= 0 || every <= 0 || failures % every != 0 {
            return None;
        }
        let step = (failures / every - 1).clamp(0, 40) as u32;
        Some(
            self.lockout_secs
                .saturating_mul(1i64 << step.min(62))
                .min(self.max_lockout_secs),
        )
    }
}

pub struct Challenge {
    pub kind: String,
    pub subject: String,
    pub message: String,
    pub expires_at: i64,
}

impl Store {
    /// Record a new one-time code for `email` asked by `client`, unless the address or
    /// the client already had their share in the last `bounds.window` seconds: a refused
    /// code is never stored (it would replace the one already mailed).
    pub async fn store_code(
        &self,
        email: &str,
        client: &str,
        code_hash: &[u8; 32],
        ttl: i64,
        bounds: &CodeBounds,
    ) -> Result<Issued, StoreError> {
        let t = now();
        // Old rows are of no use; keep the table small.
        self.db
            .execute(
                "DELETE FROM login_codes WHERE expires_at < $1",
                params![t - 86400],
            )
            .await?;
        self.retry_conflicts(|mut tx| async move {
            let by_address = count(tx.as_mut(), "SELECT COUNT(*) FROM login_codes WHERE email = $1 AND created_at > $2", params![email, t - bounds.window]).await?;
            if by_address >= bounds.per_address {
                return Ok(Issued::TooManyForAddress);
            }
            let by_client = count(tx.as_mut(), "SELECT COUNT(*) FROM login_codes WHERE client = $1 AND created_at > $2", params![client, t - bounds.window]).await?;
            if by_client >= bounds.per_client {
                return Ok(Issued::TooManyForClient);
            }
            tx.execute(
                "INSERT INTO login_codes (id, email, code_sha256, created_at, expires_at, created_us, client)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
                params![uuid::Uuid::new_v4().to_string(), email, code_hash, t, t + ttl, now_us(), client],
            )
            .await?;
            tx.commit().await?;
            Ok(Issued::Stored)
        })
        .await
    }

    /// Check a code from `client` (its bucket) against the latest unused code of
    /// `email`. A right code is used up and clears that client's guard on the address; a
    /// wrong one counts against the code, against the (address, client) pair, whose every
    /// `max_attempts`-th failure locks that client out of the address for a doubling
    /// time, and against the address from any client, locked out as a whole at a tenfold
    /// step (a new code resets none of them). So a stranger's guesses lock the stranger
    /// out, not the owner, while guesses spread over many clients stay bounded.
    pub async fn check_code(
        &self,
        email: &str,
        client: &str,
        code_hash: &[u8; 32],
        guard: &GuessGuard,
    ) -> Result<CodeCheck, StoreError> {
        self.retry_conflicts(|mut tx| async move {
            let t = now();
            let mut mine = read_guard(tx.as_mut(), email, client, guard, t).await?;
            let mut anyone = read_guard(tx.as_mut(), email, ANY_CLIENT, guard, t).await?;
            let locked_until = mine.locked_until.max(anyone.locked_until);
            if locked_until > t {
                return Ok(CodeCheck::LockedOut(locked_until - t));
            }
            let row = query_opt(
                tx.as_mut(),
                "SELECT id, code_sha256, expires_at, attempts FROM login_codes
                 WHERE email = $1 AND used_at IS NULL
                 ORDER BY created_at DESC, created_us DESC LIMIT 1",
                params![email],
            )
            .await?;
            let Some(row) = row else {
                return Ok(CodeCheck::NoCode);
            };
            let (id, hash, expires_at, attempts) =
                (row.text(0)?, row.bytes(1)?, row.int(2)?, row.int(3)?);
            let result = if expires_at <= t {
                CodeCheck::Expired
            } else if attempts >= guard.max_attempts {
                CodeCheck::TooManyAttempts
            } else if crate::crypto::secret_eq(&hash, code_hash) {
                tx.execute(
                    "UPDATE login_codes SET used_at = $2 WHERE id = $1",
                    params![&id, t],
                )
                .await?;
                tx.execute(
                    "DELETE FROM sign_in_guards WHERE email = $1 AND client = $2",
                    params![email, client],
                )
                .await?;
                CodeCheck::Ok
            } else {
                tx.execute(
                    "UPDATE login_codes SET attempts = attempts + 1 WHERE id = $1",
                    params![&id],
                )
                .await?;
                mine.failures += 1;
                anyone.failures += 1;
                let until = |secs: Option<i64>| secs.map_or(0, |secs| t + secs);
                mine.locked_until = until(guard.lockout_after(mine.failures));
                anyone.locked_until = until(guard.address_lockout_after(anyone.failures));
                write_guard(tx.as_mut(), email, client, &mine, t).await?;
                write_guard(tx.as_mut(), email, ANY_CLIENT, &anyone, t).await?;
                let locked_until = mine.locked_until.max(anyone.locked_until);
                if locked_until > t {
                    CodeCheck::LockedOut(locked_until - t)
                } else {
                    CodeCheck::Wrong
                }
            };
            tx.commit().await?;
            Ok(result)
        })
        .await
    }

    /// Store a challenge asked by `client`, unless the client or the challenge's subject
    /// already holds its share of unexpired, unused ones.
    pub async fn store_challenge(
        &self,
        nonce: &str,
        client: &str,
        c: &Challenge,
        bounds: &ChallengeBounds,
    ) -> Result<Issued, StoreError> {
        let t = now();
        self.db
            .execute(
                "DELETE FROM challenges WHERE expires_at < $1",
                params![t - 3600],
            )
            .await?;
        self.retry_conflicts(|mut tx| async move {
            let by_client = count(tx.as_mut(), "SELECT COUNT(*) FROM challenges WHERE client = $1 AND expires_at > $2 AND used_at IS NULL", params![client, t]).await?;
            if by_client >= bounds.per_client {
                return Ok(Issued::TooManyForClient);
            }
            let by_subject = count(tx.as_mut(), "SELECT COUNT(*) FROM challenges WHERE subject = $1 AND kind = $2 AND expires_at > $3 AND used_at IS NULL", params![&c.subject, &c.kind, t]).await?;
            if by_subject >= bounds.per_subject {
                return Ok(Issued::TooManyForAddress);
            }
            tx.execute(
                "INSERT INTO challenges (nonce, kind, subject, message, created_at, expires_at, client)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
                params![nonce, &c.kind, &c.subject, &c.message, t, c.expires_at, client],
            )
            .await?;
            tx.commit().await?;
            Ok(Issued::Stored)
        })
        .await
    }

    /// Use up a challenge: returns it once, then never again (also across instances:
    /// the update only succeeds for the first taker).
    pub async fn take_challenge(&self, nonce: &str) -> Result<Option<Challenge>, StoreError> {
        self.retry_conflicts(|mut tx| async move {
            let c = query_opt(
                tx.as_mut(),
                "SELECT kind, subject, message, expires_at FROM challenges WHERE nonce = $1 AND used_at IS NULL",
                params![nonce],
            )
            .await?;
            let Some(c) = c else {
                return Ok(None);
            };
            let taken = tx
                .execute(
                    "UPDATE challenges SET used_at = $2 WHERE nonce = $1 AND used_at IS NULL",
                    params![nonce, now()],
                )
                .await?;
            tx.commit().await?;
            if taken != 1 {
                return Ok(None);
            }
            Ok(Some(Challenge {
                kind: c.text(0)?,
                subject: c.text(1)?,
                message: c.text(2)?,
                expires_at: c.int(3)?,
            }))
        })
        .await
    }
}

/// A `SELECT COUNT(*)` inside a transaction.
async fn count(
    tx: &mut dyn Tx,
    sql: &str,
    params: Vec<super::sql::Value>,
) -> Result<i64, StoreError> {
    query_opt(tx, sql, params)
        .await?
        .map_or(Ok(0), |r| r.int(0))
}

/// One guard row as read: its failures (forgotten after a quiet `forget_after`) and
/// lock-out.
struct Guard {
    failures: i64,
    locked_until: i64,
}

async fn read_guard(
    tx: &mut dyn Tx,
    email: &str,
    client: &str,
    guard: &GuessGuard,
    t: i64,
) -> Result<Guard, StoreError> {
    let row = query_opt(
        tx,
        "SELECT failures, last_failure, locked_until FROM sign_in_guards
         WHERE email = $1 AND client = $2",
        params![email, client],
    )
    .await?;
    let (failures, last_failure, locked_until) = match &row {
        Some(r) => (r.int(0)?, r.int(1)?, r.int(2)?),
        None => (0, 0, 0),
    };
    // A quiet stretch forgives the past failures.
    let failures = if t - last_failure > guard.forget_after {
        0
    } else {
        failures
    };
    Ok(Guard {
        failures,
        locked_until,
    })
}

async fn write_guard(
    tx: &mut dyn Tx,
    email: &str,
    client: &str,
    g: &Guard,
    t: i64,
) -> Result<(), StoreError> {
    tx.execute(
        "INSERT INTO sign_in_guards (email, client, failures, last_failure, locked_until)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (email, client)
         DO UPDATE SET failures = $3, last_failure = $4, locked_until = $5",
        params![email, client, g.failures, t, g.locked_until],
    )
    .await?;
    Ok(())
}
