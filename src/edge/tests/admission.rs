//! What the pipeline admits without a node's help: a kept answer serves the next caller
//! (the node is not called again), and a WebSocket upgrade holds one of its key's
//! connection places until it is dropped.

use super::attempts::{counting_node, Role};
use super::{refused, run, setup_with, Ctx, Fake, Outcome};
use std::sync::atomic::Ordering;

/// One `/rpc/eth` call through the pipeline: the answer and its `X-Cache-Status`.
async fn call(s: &super::Setup, body: &'static str) -> (serde_json::Value, String) {
    let mut fake = Fake::new("POST", "/rpc/eth").key(&s.free_key).json(body);
    let mut ctx = Ctx::new();
    let Ok(Outcome::Reply(r)) = s.edge.pipeline(&mut fake, &mut ctx).await else {
        panic!("no answer");
    };
    let status = r
        .headers
        .iter()
        .find(|(k, _)| *k == "X-Cache-Status")
        .map(|(_, v)| v.to_string())
        .unwrap_or_default();
    (serde_json::from_slice(&r.body).unwrap(), status)
}

#[tokio::test]
async fn a_kept_answer_serves_the_next_caller_and_the_node_is_not_asked_again() {
    let (url, calls) = counting_node(Role::Answers).await;
    let s = setup_with(&format!(
        "rpc:\n  coalesce: false\n\
         pools:\n  eth_el:\n    hosts:\n      - {{id: el-0, url: \"{url}\", family: el-anvil}}\n"
    ))
    .await;
    let st = &s.edge.state;
    crate::pools::health::round(&st.gateway.client, &st.pools, &st.config.app.health).await;

    let (first, status) = call(&s, r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}"#).await;
    assert_eq!(
        (first["result"].as_str(), status.as_str()),
        (Some("0x2a"), "miss")
    );
    let (second, status) = call(&s, r#"{"jsonrpc":"2.0","id":"b","method":"eth_chainId"}"#).await;
    assert_eq!(
        (second["result"].as_str(), status.as_str()),
        (Some("0x2a"), "hit")
    );
    assert_eq!(second["id"], "b", "a kept answer carries the caller's id");
    assert_eq!(calls.load(Ordering::Relaxed), 1);

    // A read the cache does not keep goes to the node each time.
    let balance = r#"{"jsonrpc":"2.0","id":1,"method":"eth_getBalance","params":["0x0000000000000000000000000000000000000000","latest"]}"#;
    call(&s, balance).await;
    call(&s, balance).await;
    assert_eq!(calls.load(Ordering::Relaxed), 3);
}

/// An upgrade the pipeline admits: the session it hands over (holding its place).
async fn open(s: &super::Setup, mut fake: Fake) -> Box<crate::edge::ws_upgrade::WsUpgrade> {
    match s.edge.pipeline(&mut fake, &mut Ctx::new()).await {
        Ok(Outcome::WebSocket(up)) => up,
        Ok(_) => panic!("not an upgrade"),
        Err(e) => panic!("refused: {} {}", e.status, e.code),
    }
}

#[tokio::test]
async fn a_websocket_upgrade_holds_a_connection_place_until_it_is_dropped() {
    let s = setup_with(
        "streams:\n  websocket:\n    max_connections_per_key: {default: 2}\n\
         pools:\n  eth_el:\n    hosts:\n      - {id: el-0, url: \"http://127.0.0.1:9\", family: el-anvil}\n",
    )
    .await;
    let upgrade = |s: &super::Setup| Fake::new("GET", "/rpc/eth").key(&s.free_key).websocket();
    let first = open(&s, upgrade(&s)).await;
    let second = open(&s, upgrade(&s)).await;
    let (status, code, e) = refused(run(&s.edge, &mut upgrade(&s)).await);
    assert_eq!((status, code), (429, "stream_cap_exceeded"));
    assert_eq!(e.extra["max_connections"], 2);

    // A handshake that is not one is refused before a place is taken.
    let mut bad = upgrade(&s);
    bad.headers.retain(|(k, _)| *k != "sec-websocket-key");
    drop(first);
    assert_eq!(refused(run(&s.edge, &mut bad).await).0, 400);
    let third = open(&s, upgrade(&s)).await;
    assert_eq!(
        refused(run(&s.edge, &mut upgrade(&s)).await).1,
        "stream_cap_exceeded"
    );
    drop((second, third));
}
