//! The pipeline as a unit: a fake client request (`Fake`, a `Downstream`) through
//! `Edge::pipeline` on a state built from a real configuration and the real manifests,
//! with a store in a temporary directory and nodes that never answer (every case here is
//! decided before a node is called). The limiter reads a clock the test moves, so no case
//! waits for, or races, a second boundary.

use super::{Ctx, Downstream, Edge, Outcome};
use crate::errors::ApiError;
use crate::limits::ManualClock;
use async_trait::async_trait;
use bytes::Bytes;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

mod admission;
mod attempts;

/// A client request as a server would give it to the pipeline.
struct Fake {
    method: &'static str,
    path: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Bytes,
    /// Set when the pipeline read the body (it must not, for what it refuses first).
    body_read: bool,
    upgrade: bool,
}

impl Fake {
    fn new(method: &'static str, path: &'static str) -> Self {
        Fake {
            method,
            path,
            headers: vec![("host", "edge.test".into())],
            body: Bytes::new(),
            body_read: false,
            upgrade: false,
        }
    }

    fn key(mut self, key: &str) -> Self {
        self.headers
            .push(("authorization", format!("Bearer {key}")));
        self
    }

    /// A WebSocket handshake (RFC 6455's sample key).
    fn websocket(mut self) -> Self {
        self.upgrade = true;
        self.headers.push(("upgrade", "websocket".into()));
        self.headers.push(("connection", "Upgrade".into()));
        self.headers
            .push(("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==".into()));
        self.headers.push(("sec-websocket-version", "13".into()));
        self
    }

    fn json(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.headers
            .push(("content-type", "application/json".into()));
        self.body = Bytes::from(body.into());
        self
    }
}

#[async_trait]
impl Downstream for Fake {
    fn method(&self) -> &str {
        self.method
    }
    fn path(&self) -> &str {
        self.path
    }
    fn query(&self) -> Option<&str> {
        None
    }
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn header_list(&self, name: &str) -> Option<String> {
        let parts: Vec<&str> = self
            .headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
    fn cookies(&self) -> Option<String> {
        None
    }
    fn authority(&self) -> Option<&str> {
        self.header("host")
    }
    fn is_upgrade(&self) -> bool {
        self.upgrade
    }
    fn client_ip(&self) -> Option<IpAddr> {
        Some(IpAddr::from([192, 0, 2, 7]))
    }
    fn is_tls(&self) -> bool {
        false
    }
    async fn read_body(&mut self, limit: usize) -> Result<Bytes, ApiError> {
        self.body_read = true;
        if self.body.len() > limit {
            return Err(super::payload_too_large(limit));
        }
        Ok(self.body.clone())
    }
}

/// An edge on a configuration like an operator's: the real manifests, plans, a free-plan
/// limit of 2 calls/s on `/rpc/eth`, and an `eth_el` pool whose one node never answers.
struct Setup {
    edge: Edge,
    clock: ManualClock,
    free_key: String,
    _dir: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

async fn setup() -> Setup {
    setup_with(
        "limits:\n  burst: 1\n  categories:\n    eth_rpc: {free: 2}\n\
         rpc:\n  max_batch: 3\n  max_body_bytes: 4096\n\
         pools:\n  eth_el:\n    hosts:\n      - {id: el-0, url: \"http://127.0.0.1:9\", family: el-anvil}\n",
    )
    .await
}

/// A state from the base configuration and `sections` (limits, rpc, pools...).
async fn setup_with(sections: &str) -> Setup {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "chainedge-pipeline-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let app_path = dir.join("app.yaml");
    std::fs::write(
        &app_path,
        format!(
            "plugins: {plugins}\nlisten:\n  http: [\"127.0.0.1:1\"]\nmetrics:\n  listen: \"127.0.0.1:1\"\n\
             store:\n  path: {store}\nplans: [free, basic, pro, business, enterprise, scale]\n{sections}",
            plugins = root.join("plugins").display(),
            store = dir.join("store.db").display(),
        ),
    )
    .unwrap();
    let loaded = crate::app::load(None, Some(&app_path), crate::config::Purpose::Serve)
        .unwrap_or_else(|e| {
            panic!(
                "config: {}",
                e.iter()
                    .map(|e| e.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            )
        });
    let store = crate::store::Store::open(&crate::store::Target::from_config(&loaded.app).unwrap())
        .await
        .unwrap();
    let tenant = store.create_tenant("t", "free").await.unwrap();
    let (_, free_key) = store
        .create_key(
            &tenant,
            None,
            "k",
            &["rpc:read".to_string()],
            true,
            &Default::default(),
        )
        .await
        .unwrap();
    let (mut state, _) =
        crate::app::edge_state(loaded.app, loaded.matcher, store, Default::default()).unwrap();
    let clock = ManualClock::default();
    clock.advance(Duration::from_millis(1_500));
    std::sync::Arc::get_mut(&mut state)
        .expect("the state is not shared yet")
        .limiter
        .set_clock(clock.clone());
    Setup {
        edge: Edge { state, live: None },
        clock,
        free_key,
        _dir: TempDir(dir),
    }
}

/// The pipeline's decision: the refusal's status and code, or the kind of outcome.
async fn run(edge: &Edge, fake: &mut Fake) -> Result<&'static str, (u16, &'static str, ApiError)> {
    let mut ctx = Ctx::new();
    match edge.pipeline(fake, &mut ctx).await {
        Ok(Outcome::Reply(r)) if r.status < 400 => Ok("reply"),
        // A refusal answered on `/rpc/eth` as the JSON-RPC error with the call's id: its
        // code and fields are the ones `error.data` carries.
        Ok(Outcome::Reply(r)) => {
            let answer: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            assert_eq!(answer["jsonrpc"], "2.0", "{answer}");
            let code = ctx.error_code.expect("the refusal's code is logged");
            let mut e = ApiError::new(r.status, code, "");
            if let Some(data) = answer["error"]["data"].as_object() {
                assert_eq!(data["error"], code);
                e.extra = data.clone();
            }
            Err((r.status, code, e))
        }
        Ok(Outcome::Proxy(_)) => Ok("proxy"),
        Ok(Outcome::Stream(_)) => Ok("stream"),
        Ok(Outcome::WebSocket(_)) => Ok("websocket"),
        Err(e) => Err((e.status, e.code, e)),
    }
}

fn refused(
    r: Result<&'static str, (u16, &'static str, ApiError)>,
) -> (u16, &'static str, ApiError) {
    r.expect_err("refused")
}

#[tokio::test]
async fn unknown_routes_and_missing_keys_are_refused_before_any_body_is_read() {
    let s = setup().await;
    let mut nowhere = Fake::new("GET", "/v1/nowhere");
    assert_eq!(refused(run(&s.edge, &mut nowhere).await).0, 404);

    let mut anonymous = Fake::new("POST", "/rpc/eth").json(r#"{"id":1,"method":"eth_chainId"}"#);
    let (status, code, _) = refused(run(&s.edge, &mut anonymous).await);
    assert_eq!((status, code), (401, "unauthorized"));
    assert!(
        !anonymous.body_read,
        "a refused caller's body is never read"
    );

    let mut wrong_key = Fake::new("POST", "/rpc/eth")
        .key("ce_not_a_key")
        .json(r#"{"id":1,"method":"eth_chainId"}"#);
    assert_eq!(refused(run(&s.edge, &mut wrong_key).await).0, 401);
}

#[tokio::test]
async fn the_method_table_and_the_batch_cap_answer_before_any_node() {
    let s = setup().await;
    let mut admin = Fake::new("POST", "/rpc/eth")
        .key(&s.free_key)
        .json(r#"{"jsonrpc":"2.0","id":1,"method":"anvil_setBalance","params":["0x00","0x1"]}"#);
    let (status, code, _) = refused(run(&s.edge, &mut admin).await);
    assert_eq!((status, code), (403, "method_unknown"));

    // Over `rpc.max_batch` (3): permanent, with the maximum, and it costs no budget.
    let batch = format!(
        "[{}]",
        [r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}"#; 4].join(",")
    );
    for _ in 0..5 {
        let mut big = Fake::new("POST", "/rpc/eth")
            .key(&s.free_key)
            .json(batch.clone());
        let (status, _, e) = refused(run(&s.edge, &mut big).await);
        assert_eq!(status, 400);
        assert_eq!(e.extra.get("max_batch"), Some(&serde_json::json!(3)));
    }
    // The budget (2/s, burst 1) is untouched: the next unknown method is still judged by
    // the method table, not the limiter.
    let mut next = Fake::new("POST", "/rpc/eth")
        .key(&s.free_key)
        .json(r#"{"id":2,"method":"evm_mine"}"#);
    assert_eq!(refused(run(&s.edge, &mut next).await).1, "method_unknown");
}

#[tokio::test]
async fn a_body_over_the_bound_is_413() {
    let s = setup().await;
    let mut big = Fake::new("POST", "/rpc/eth")
        .key(&s.free_key)
        .json(vec![b' '; 5000]);
    let (status, code, _) = refused(run(&s.edge, &mut big).await);
    assert_eq!((status, code), (413, "payload_too_large"));
}

#[tokio::test]
async fn every_call_counts_and_the_budget_comes_back_with_time() {
    let s = setup().await;
    // 2 calls/s with burst 1: within one second of the moved clock, the third is refused.
    let call = || {
        Fake::new("POST", "/rpc/eth")
            .key(&s.free_key)
            .json(r#"{"id":1,"method":"evm_mine"}"#)
    };
    for _ in 0..2 {
        assert_eq!(refused(run(&s.edge, &mut call()).await).1, "method_unknown");
    }
    let (status, code, e) = refused(run(&s.edge, &mut call()).await);
    assert_eq!((status, code), (429, "rate_limited"));
    assert!(e.extra.contains_key("retry_after_sec"), "{:?}", e.extra);
    // A batch of 2 counts twice: refused as a whole while the budget is spent.
    let mut batch = Fake::new("POST", "/rpc/eth")
        .key(&s.free_key)
        .json(r#"[{"id":1,"method":"evm_mine"},{"id":2,"method":"evm_mine"}]"#);
    assert_eq!(refused(run(&s.edge, &mut batch).await).0, 429);

    s.clock.advance(Duration::from_secs(3));
    assert_eq!(refused(run(&s.edge, &mut call()).await).1, "method_unknown");
}

/// The pipeline's future is part of each request's boxed future, written whole into its
/// box when the request begins (and it sized every connection's task before the idle
/// wait left the request): local handlers, stream openers, the JSON-RPC general path
/// and calls through Pingora's client are boxed, so it stays at the size of the fast
/// paths' (2.0 KiB; 3.0 before the single-call read was boxed, 11.6 at first).
#[tokio::test]
async fn the_pipeline_future_stays_small() {
    let s = setup().await;
    let mut fake = Fake::new("GET", "/x");
    let mut ctx = Ctx::new();
    let size = std::mem::size_of_val(&s.edge.pipeline(&mut fake, &mut ctx));
    assert!(size <= 2 * 1024, "the pipeline future is {size} bytes");
}
