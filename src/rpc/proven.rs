//! Answers already proven, by the request they answered: a node's answer whose `result`
//! is byte for byte one the edge proved for the same call is proven again without a
//! tree parse or a recomputation (the common case: a hot block read by many wallets,
//! checked once). Bounded by bytes; the least recently used let go.

use alloy_primitives::B256;
use bytes::Bytes;
use lru::LruCache;
use std::sync::Mutex;

/// What the memo holds at most, in request and result bytes.
const KEPT_BYTES: usize = 16 << 20;
/// A result larger than this is checked each time rather than kept.
const LARGEST_KEPT: usize = 1 << 20;

/// The block an answer is about (its number and hash), when it names one.
pub type About = Option<(u64, B256)>;

/// Proven results by call (method and params as sent), with the block each is about.
pub struct ProvenAnswers {
    kept: Mutex<Kept>,
}

struct Kept {
    by_call: LruCache<String, (Bytes, About)>,
    bytes: usize,
}

/// The `result` of a JSON-RPC answer as the node wrote it (`None` for an error, a
/// `null` result, or bytes that are not JSON-RPC).
pub fn raw_result(answer: &[u8]) -> Option<&str> {
    super::cache::result_of(answer).ok().map(|r| r.get())
}

impl Default for ProvenAnswers {
    fn default() -> Self {
        ProvenAnswers {
            kept: Mutex::new(Kept {
                by_call: LruCache::unbounded(),
                bytes: 0,
            }),
        }
    }
}

impl ProvenAnswers {
    /// Whether `result` is what was proven for `call`: the block it is about, if so.
    pub fn holds(&self, call: &str, result: &str) -> Option<About> {
        let mut kept = self.kept.lock().ok()?;
        kept.by_call
            .get(call)
            .filter(|(r, _)| r == result.as_bytes())
            .map(|(_, about)| *about)
    }

    /// Keep `result`, just proven for `call` (about block `about`).
    pub fn keep(&self, call: String, result: &str, about: About) {
        if result.len() > LARGEST_KEPT {
            return;
        }
        let Ok(mut kept) = self.kept.lock() else {
            return;
        };
        let size = call.len() + result.len();
        let old = kept.by_call.put(
            call.clone(),
            (Bytes::copy_from_slice(result.as_bytes()), about),
        );
        if let Some((old, _)) = old {
            kept.bytes -= call.len() + old.len();
        }
        kept.bytes += size;
        while kept.bytes > KEPT_BYTES {
            match kept.by_call.pop_lru() {
                Some((c, (r, _))) => kept.bytes -= c.len() + r.len(),
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proven_result_holds_for_its_call_only_and_byte_for_byte() {
        let memo = ProvenAnswers::default();
        let answer = br#"{"jsonrpc":"2.0","id":7,"result":{"hash":"0x01","number":"0x2"}}"#;
        let result = raw_result(answer).unwrap();
        assert_eq!(result, r#"{"hash":"0x01","number":"0x2"}"#);
        let call = r#"eth_getBlockByNumber["0x2",false]"#.to_string();
        assert!(memo.holds(&call, result).is_none());
        memo.keep(call.clone(), result, Some((2, B256::with_last_byte(1))));
        assert_eq!(
            memo.holds(&call, result),
            Some(Some((2, B256::with_last_byte(1))))
        );
        // Another id, the same result: holds. Another result or another call: not.
        let again = br#"{"jsonrpc":"2.0","id":8,"result":{"hash":"0x01","number":"0x2"}}"#;
        assert!(memo.holds(&call, raw_result(again).unwrap()).is_some());
        assert!(memo
            .holds(&call, r#"{"hash":"0x02","number":"0x2"}"#)
            .is_none());
        assert!(memo
            .holds(r#"eth_getBlockByNumber["0x3",false]"#, result)
            .is_none());
        assert_eq!(
            raw_result(br#"{"jsonrpc":"2.0","id":1,"result":null}"#),
            None
        );
        assert_eq!(
            raw_result(br#"{"jsonrpc":"2.0","id":1,"error":{"code":1}}"#),
            None
        );
    }

    #[test]
    fn the_memo_stays_within_its_bytes() {
        let memo = ProvenAnswers::default();
        let big = "x".repeat(LARGEST_KEPT);
        for i in 0..40 {
            memo.keep(format!("call{i}"), &big, None);
        }
        let kept = memo.kept.lock().unwrap();
        assert!(kept.bytes <= KEPT_BYTES, "{}", kept.bytes);
        assert!(kept.by_call.len() >= 15);
    }
}
