//! The per-key usage table (`crate::usage`) made durable: a journal thread appends the
//! table to a local file every `usage.journal_interval_ms` (`journal`), and the flusher
//! adds the journaled counts to the store with the journal's cursor in the same
//! transaction (`flusher`). The keys' request logs have their own writer (`requests`). docs/operations.md says what a crash can lose.

pub mod flusher;
pub mod journal;
pub mod requests;

pub use flusher::{Durable, Flusher};
