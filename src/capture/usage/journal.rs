//! The usage journal: what a crash cannot take. Every `usage.journal_interval_ms` the
//! counts gathered in memory are appended, as one numbered batch, to this process's
//! journal on local disk; the flusher adds batches to the store together with the
//! journal's cursor (the last batch in), so a batch is counted exactly once whether the
//! process flushes it, dies before, or dies in the middle.
//!
//! Layout under `<state_dir>/usage-journal/`: one directory per process (a random id),
//! holding a `lock` file the process keeps locked for its life and segments named by
//! their first batch (`00000000000000000001.log`), one JSON line per batch. A directory
//! whose lock can be taken belongs to a process that is gone: an orphan, replayed (the
//! batches past its cursor) and removed by whichever instance finds it.

use crate::store::usage::{Counts, UsageRow};
use crate::usage::rows_of;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

/// The directory under `store.state_dir` that holds the journals.
pub const DIR: &str = "usage-journal";

/// One batch as written: its number, when (Unix ms), and its rows.
#[derive(Debug, Serialize, Deserialize)]
struct Line {
    seq: u64,
    at: i64,
    /// `[key id, tenant id, minute, calls, compute units, errors, rate limited]`.
    rows: Vec<(String, String, i64, i64, i64, i64, i64)>,
}

/// This process's journal, written by one thread.
pub struct Journal {
    id: String,
    dir: PathBuf,
    /// Held locked for the process's life: the journal is not an orphan while it is.
    _lock: File,
    segment: File,
    segment_first: u64,
    segment_empty: bool,
    next_seq: u64,
}

impl Journal {
    /// A new journal under `root` (`<state_dir>/usage-journal`).
    pub fn create(root: &Path) -> io::Result<Journal> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let dir = root.join(&id);
        fs::create_dir_all(&dir)?;
        let lock = File::create(dir.join("lock"))?;
        lock.try_lock().map_err(io::Error::other)?;
        let segment = open_segment(&dir, 1)?;
        sync_dir(&dir);
        sync_dir(root);
        Ok(Journal {
            id,
            dir,
            _lock: lock,
            segment,
            segment_first: 1,
            segment_empty: true,
            next_seq: 1,
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// Append `rows` as the next batch, on disk before this returns; its number.
    pub fn append(&mut self, rows: &[UsageRow], at_ms: i64) -> io::Result<u64> {
        let seq = self.next_seq;
        let line = Line {
            seq,
            at: at_ms,
            rows: rows
                .iter()
                .map(|r| {
                    let c = &r.counts;
                    (
                        r.key_id.clone(),
                        r.tenant_id.clone(),
                        r.minute,
                        c.calls,
                        c.compute_units,
                        c.errors,
                        c.rate_limited,
                    )
                })
                .collect(),
        };
        let mut bytes = serde_json::to_vec(&line).map_err(io::Error::other)?;
        bytes.push(b'\n');
        self.segment.write_all(&bytes)?;
        self.segment.sync_data()?;
        self.segment_empty = false;
        self.next_seq += 1;
        Ok(seq)
    }

    /// Batches up to `seq` are in the store: start a new segment when the current one
    /// holds any of them, and delete the ones wholly at or before `seq`. Cut at every
    /// flush, not only when nothing is pending: under steady traffic a batch is always
    /// pending, and the journal would grow with uptime. It holds what the store has not
    /// taken, plus at most the batches written since the previous flush.
    pub fn committed(&mut self, seq: u64) -> io::Result<()> {
        if !self.segment_empty && seq >= self.segment_first {
            self.segment = open_segment(&self.dir, self.next_seq)?;
            self.segment_first = self.next_seq;
            self.segment_empty = true;
        }
        let firsts = segment_firsts(&self.dir)?;
        for (i, first) in firsts.iter().enumerate() {
            // A segment ends where the next one starts.
            let last = match firsts.get(i + 1) {
                Some(next) => next - 1,
                None => continue,
            };
            if *first != self.segment_first && last <= seq {
                fs::remove_file(segment_path(&self.dir, *first))?;
            }
        }
        Ok(())
    }

    /// A clean stop with everything in the store: the journal goes.
    pub fn remove(self) -> io::Result<()> {
        fs::remove_dir_all(&self.dir)
    }
}

/// A journal left by a process that is gone, locked by us while we replay it.
pub struct Orphan {
    pub id: String,
    dir: PathBuf,
    _lock: File,
}

/// What an orphan holds: its batches' rows summed per key and minute, the batch range,
/// and when its last batch was written (Unix ms).
#[derive(Debug, Default)]
pub struct Recovered {
    pub rows: Vec<UsageRow>,
    pub first: u64,
    pub last: u64,
    pub last_at_ms: i64,
    /// A last line cut short by the crash (its batch is lost).
    pub torn: bool,
}

impl Orphan {
    /// The batches after `cursor` (those before are in the store already).
    pub fn read_after(&self, cursor: u64) -> io::Result<Recovered> {
        let mut out = Recovered::default();
        let mut sums: std::collections::BTreeMap<(String, i64), (String, Counts)> =
            Default::default();
        'segments: for first in segment_firsts(&self.dir)? {
            let file = File::open(segment_path(&self.dir, first))?;
            for line in io::BufReader::new(file).split(b'\n') {
                let line = line?;
                let Ok(batch) = serde_json::from_slice::<Line>(&line) else {
                    out.torn = true;
                    break 'segments;
                };
                if batch.seq <= cursor {
                    continue;
                }
                if out.first == 0 {
                    out.first = batch.seq;
                }
                out.last = batch.seq;
                out.last_at_ms = batch.at;
                for (key, tenant, minute, calls, cu, errors, limited) in batch.rows {
                    let e = sums
                        .entry((key, minute))
                        .or_insert((tenant, Counts::default()));
                    e.1.add(&Counts {
                        calls,
                        compute_units: cu,
                        errors,
                        rate_limited: limited,
                    });
                }
            }
        }
        out.rows = rows_of(sums);
        Ok(out)
    }

    /// Replayed: the journal goes.
    pub fn remove(self) -> io::Result<()> {
        fs::remove_dir_all(&self.dir)
    }
}

/// The journals under `root` no live process holds (a journal being created is locked
/// before it has a segment, so it is never taken for one).
pub fn orphans(root: &Path) -> Vec<Orphan> {
    let Ok(entries) = fs::read_dir(root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        let Some(id) = dir.file_name().and_then(|n| n.to_str()).map(str::to_string) else {
            continue;
        };
        let lock = match OpenOptions::new().write(true).open(dir.join("lock")) {
            Ok(f) => f,
            // No lock file: a directory cut short while being made (nothing in it).
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                if segment_firsts(&dir).map(|s| s.is_empty()).unwrap_or(false) {
                    let _ = fs::remove_dir_all(&dir);
                }
                continue;
            }
            Err(_) => continue,
        };
        if lock.try_lock().is_ok() {
            out.push(Orphan {
                id,
                dir,
                _lock: lock,
            });
        }
    }
    out
}

fn segment_path(dir: &Path, first: u64) -> PathBuf {
    dir.join(format!("{first:020}.log"))
}

fn open_segment(dir: &Path, first: u64) -> io::Result<File> {
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(segment_path(dir, first))?;
    sync_dir(dir);
    Ok(f)
}

/// The segments' first batch numbers, in order.
fn segment_firsts(dir: &Path) -> io::Result<Vec<u64>> {
    let mut firsts: Vec<u64> = fs::read_dir(dir)?
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_suffix(".log"))
                .and_then(|n| n.parse().ok())
        })
        .collect();
    firsts.sort_unstable();
    Ok(firsts)
}

/// A new or removed name is durable once its directory is synced.
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(key: &str, minute: i64, calls: i64) -> UsageRow {
        UsageRow {
            key_id: key.into(),
            tenant_id: format!("t-{key}"),
            minute,
            counts: Counts {
                calls,
                compute_units: calls * 10,
                errors: 0,
                rate_limited: 0,
            },
        }
    }

    fn tempdir() -> PathBuf {
        let d = std::env::temp_dir().join(format!("chainedge-journal-{}", uuid::Uuid::new_v4()));
        fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_live_journal_is_no_orphan_and_a_dead_one_replays_past_its_cursor() {
        let root = tempdir();
        let mut j = Journal::create(&root).unwrap();
        assert_eq!(j.append(&[row("a", 60, 2)], 1).unwrap(), 1);
        assert_eq!(
            j.append(&[row("a", 60, 3), row("b", 120, 1)], 2).unwrap(),
            2
        );
        j.committed(1).unwrap();
        assert_eq!(j.append(&[row("a", 60, 5)], 3).unwrap(), 3);
        assert!(orphans(&root).is_empty(), "held by its process");
        let id = j.id().to_string();
        // The process dies: its lock goes with it.
        drop(j);
        let found = orphans(&root);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].id, id);
        let r = found[0].read_after(1).unwrap();
        assert_eq!((r.first, r.last, r.last_at_ms, r.torn), (2, 3, 3, false));
        let a = r.rows.iter().find(|r| r.key_id == "a").unwrap();
        assert_eq!(a.counts.calls, 8);
        assert_eq!(
            r.rows
                .iter()
                .find(|r| r.key_id == "b")
                .unwrap()
                .counts
                .calls,
            1
        );
        // Someone holds it while replaying.
        assert!(orphans(&root).is_empty());
        found.into_iter().next().unwrap().remove().unwrap();
        assert!(fs::read_dir(&root).unwrap().next().is_none());
        fs::remove_dir_all(&root).unwrap();
    }

    /// Steady traffic: a batch is always written after the one being flushed. The
    /// journal still shrinks at each flush (two segments at most), and a crash at any
    /// point replays exactly the batches past the cursor.
    #[test]
    fn under_steady_traffic_the_journal_stays_small() {
        let root = tempdir();
        let mut j = Journal::create(&root).unwrap();
        let dir = root.join(j.id());
        for seq in 1..=200i64 {
            assert_eq!(j.append(&[row("a", 60, 1)], seq).unwrap(), seq as u64);
            // The flush lags one batch behind the journal.
            if seq > 1 {
                j.committed(seq as u64 - 1).unwrap();
                let firsts = segment_firsts(&dir).unwrap();
                assert!(firsts.len() <= 2, "after {seq}: {firsts:?}");
            }
        }
        let cursor = 199;
        drop(j);
        let o = orphans(&root).into_iter().next().unwrap();
        let r = o.read_after(cursor).unwrap();
        assert_eq!((r.first, r.last), (200, 200));
        assert_eq!(r.rows[0].counts.calls, 1);
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn committed_segments_are_deleted_and_a_torn_line_ends_the_replay() {
        let root = tempdir();
        let mut j = Journal::create(&root).unwrap();
        for i in 1..=3 {
            j.append(&[row("a", 60, i)], i).unwrap();
        }
        j.committed(3).unwrap();
        j.append(&[row("a", 60, 10)], 4).unwrap();
        j.committed(3).unwrap();
        let dir = root.join(j.id());
        assert_eq!(segment_firsts(&dir).unwrap(), vec![4]);
        // A crash in the middle of a write leaves half a line.
        let mut f = OpenOptions::new()
            .append(true)
            .open(segment_path(&dir, 4))
            .unwrap();
        f.write_all(b"{\"seq\":5,\"at\":5,\"rows\":[[\"a\",60,")
            .unwrap();
        drop(j);
        let o = orphans(&root).into_iter().next().unwrap();
        let r = o.read_after(3).unwrap();
        assert_eq!((r.first, r.last, r.torn), (4, 4, true));
        assert_eq!(r.rows[0].counts.calls, 10);
        fs::remove_dir_all(&root).unwrap();
    }
}
