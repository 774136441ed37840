//! WebSocket JSON-RPC, terminated at the edge: the upgrade is checked like any request
//! (route, key, plan, rate), then every message goes through exactly the HTTP path's
//! policy — batch cap, per-call rate counting, the method table and per-family plans in
//! the gateway — and is answered by the gateway. Refusals are JSON-RPC error objects
//! whose `data` carries the HTTP envelope's fields. Subscriptions are shared: one node
//! subscription per (pool, kind, parameters) for every client (`streams::subscriptions`).
//!
//! Bounds: open connections per key (by plan), subscriptions per connection, message
//! size (`rpc.max_body_bytes`, close 1009), a bounded send queue (a slow consumer is
//! closed with 1008), ping/pong with an idle timeout, and "going away" (1001) when the
//! server shuts down for an upgrade. The same held socket carries the push channels
//! (`handlers::channels`), whose items come from the channel's source.

use super::ws_conn::WsConn;
use super::ws_upgrade::{going_away, WsUpgrade};
use super::{Ctx, Downstream, Edge, State};
use crate::auth::Principal;
use crate::errors::ApiError;
use crate::handlers::channels::admit::{connection_cap_reached, handshake_accept};
use crate::jsonrpc::methods::MethodClass;
use crate::jsonrpc::Response;
use crate::observe::metrics;
use crate::routes::Route;
use crate::rpc::compute_units::{error_answers, Cost};
use crate::rpc::{refusal_of, CallView, Incoming, MethodLabel};
use crate::streams::push::{Item, PushSource};
use crate::streams::subscriptions::{ClientSubscriptions, Ended, KINDS};
use crate::usage::Tally;
use bytes::Bytes;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use serde_json::Value;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Message, Utf8Bytes};

/// What one message got: the answer owed (none for notifications alone) and its
/// access-log fields.
struct Answered {
    body: Option<Bytes>,
    status: u16,
    upstream: Option<String>,
    error: Option<&'static str>,
    /// How the answer was checked (`x-chainedge-verified` over HTTP).
    verified: Option<&'static str>,
    /// What the message asked for (`Incoming::label`), for a key's request log.
    method: Option<MethodLabel>,
}

impl Answered {
    fn refused(body: &[u8], e: &ApiError) -> Self {
        Answered {
            body: Some(refusal_of(body, e).to_bytes()),
            status: e.status,
            upstream: None,
            error: Some(e.code),
            verified: None,
            method: None,
        }
    }
}

/// Whose caps a session counts against (API key, user, admin, or client address when
/// anonymous), and the plan that sets them.
fn owner_and_plan(principal: &Principal, client_ip: Option<IpAddr>) -> (String, &str) {
    match principal {
        Principal::Key(k) => (format!("key:{}", k.key_id), k.plan.as_str()),
        Principal::User(s) => (format!("user:{}", s.user_id), "default"),
        Principal::Admin => ("admin".to_string(), "enterprise"),
        Principal::Anonymous => (
            format!(
                "ip:{}",
                client_ip.map(|i| i.to_string()).unwrap_or_default()
            ),
            crate::config::limits::ANONYMOUS,
        ),
    }
}

impl Edge {
    /// Check an upgrade to a JSON-RPC route: the handshake headers, the pool, one request
    /// of the route's rate category, and the per-key connection cap.
    pub(super) async fn websocket<D: Downstream + ?Sized>(
        &self,
        session: &D,
        ctx: &mut Ctx,
        route: &Route,
    ) -> Result<WsUpgrade, ApiError> {
        let st = &*self.state;
        let accept = handshake_accept(&super::dispatch::HeaderView(session))?;
        // A level asked on the upgrade (or by the key or its plan) holds for every answer
        // of the session.
        let asked =
            super::dispatch::required_level(session.header(super::dispatch::REQUIRE_HEADER))?;
        let pool = route.pool.clone().unwrap_or_else(|| "eth_el".into());
        self.pool(&pool)?;
        let principal = ctx.principal.clone().unwrap_or(Principal::Anonymous);
        let required = self.required_of(&principal, asked);
        let client_ip = ctx.client(session.client_ip());
        if let Some(category) = &route.rate {
            ctx.rate_headers = self.limit(client_ip, &principal, category, Cost::request(0))?;
        }
        let conf = &st.config.app.streams.websocket;
        let (owner, plan) = owner_and_plan(&principal, client_ip);
        let cap = conf.max_connections(plan);
        let slot = st
            .ws_connections()
            .take(owner, cap)
            .await
            .ok_or_else(|| connection_cap_reached(cap))?;
        // The upgrade itself is not a call in the key's usage; each message counts.
        ctx.usage = Some(Cost {
            calls: 0,
            compute_units: 0,
        });
        Ok(WsUpgrade {
            accept,
            protocol: None,
            push: None,
            pool,
            principal,
            client_ip,
            category: route.rate.clone(),
            request_id: ctx.request_id.to_string(),
            route: ctx.route.clone(),
            grant: None,
            required,
            _slot: slot,
        })
    }

    /// The way in's limit stage for a message's calls (none when the route has no
    /// rate category).
    fn limit_message(&self, up: &WsUpgrade, cost: Cost) -> Result<(), ApiError> {
        match &up.category {
            Some(category) => self
                .limit(up.client_ip, &up.principal, category, cost)
                .map(drop),
            None => Ok(()),
        }
    }

    /// A refused message: its calls in the key's usage, the refusal as its answer.
    fn refuse(&self, up: &WsUpgrade, cost: Cost, body: &[u8], e: &ApiError) -> Answered {
        self.count_usage(&up.principal, Tally::of(cost.calls, 0, e.status, 0));
        Answered::refused(body, e)
    }

    /// An answered message in the key's usage: its calls, their units, its errors.
    fn count_answer(&self, up: &WsUpgrade, cost: Cost, answer: Option<&[u8]>) {
        let errors = answer.map_or(0, error_answers);
        let tally = Tally::of(cost.calls, cost.compute_units, 200, errors);
        self.count_usage(&up.principal, tally);
    }

    /// Whether a message is `eth_subscribe` / `eth_unsubscribe` (served in order, on the
    /// connection's own subscriptions) rather than a call the gateway answers. The
    /// view only reads a method without escapes, so a body without the name in it is
    /// not one, and ordinary calls are not parsed here.
    fn is_subscription_call(body: &[u8]) -> bool {
        memchr::memmem::find(body, b"subscribe").is_some()
            && CallView::of(body)
                .is_some_and(|v| matches!(v.method, "eth_subscribe" | "eth_unsubscribe"))
    }

    /// One call or batch, answered as the same body over HTTP would be; `None` when
    /// nothing is owed (only notifications). Needs nothing of the connection's state, so
    /// several run at once. Each message gets its access-log line.
    async fn ws_call(&self, up: &WsUpgrade, body: Bytes, request_id: String) -> Option<Bytes> {
        let started = Instant::now();
        let answered = self.ws_answer(up, &body, &request_id).await;
        self.log_message(up, &request_id, started, &answered);
        answered.body
    }

    async fn ws_answer(&self, up: &WsUpgrade, body: &Bytes, request_id: &str) -> Answered {
        let st = &*self.state;
        let incoming = Incoming::parse(body);
        let method = self.logged_method(up, &incoming);
        let pool = match self.pool(&up.pool) {
            Ok(p) => p,
            Err(e) => return self.refuse(up, incoming.cost(&st.compute_units), body, &e),
        };
        let caller = self.rpc_caller(&up.principal);
        let limit = |cost| self.limit_message(up, cost);
        let prices = &st.compute_units;
        let entered = st
            .gateway
            .enter(pool, incoming, &caller, request_id, prices, limit)
            .await;
        let reply = (entered.reply).and_then(|r| super::dispatch::unverified(r, up.required));
        let mut answered = match reply {
            Ok(r) => {
                let answer = (!r.body.is_empty()).then_some(r.body);
                self.count_answer(up, entered.cost, answer.as_deref());
                Answered {
                    body: answer,
                    status: 200,
                    upstream: r.upstream,
                    error: None,
                    verified: Some(r.verified.as_str()),
                    method: None,
                }
            }
            Err(e) => self.refuse(up, entered.cost, body, &e),
        };
        answered.method = method;
        answered
    }

    /// A message's method for its key's request log (none when nothing is logged).
    fn logged_method(&self, up: &WsUpgrade, incoming: &Incoming<'_>) -> Option<MethodLabel> {
        (matches!(up.principal, Principal::Key(_)) && self.state.requests().enabled()).then(|| {
            let methods = self.state.pools.get(&up.pool).map(|p| &*p.methods);
            incoming.label(methods)
        })
    }

    /// A message's access-log line: the upgrade's route and caller, the message's own
    /// request id (the upgrade's, then `-N`), its status (200 for a JSON-RPC answer,
    /// the HTTP path's status for a refusal), time and node.
    fn log_message(&self, up: &WsUpgrade, request_id: &str, started: Instant, a: &Answered) {
        let client = up.client_ip.map(|ip| ip.to_string()).unwrap_or_default();
        let route = up.route.as_deref();
        self.log_finished(&super::finish::Finished {
            request_id,
            client: &client,
            method: "WS",
            path: route.map_or("", |r| r.path.as_str()),
            route,
            principal: Some(&up.principal),
            status: a.status,
            latency_us: started.elapsed().as_micros() as u64,
            upstream: a.upstream.as_deref(),
            error: a.error,
            verified: a.verified,
            logged_as: a.method.as_deref(),
        });
    }

    /// `eth_subscribe` / `eth_unsubscribe`, admitted like any call.
    async fn ws_subscription(
        &self,
        up: &WsUpgrade,
        subs: &mut ClientSubscriptions,
        body: &[u8],
        request_id: &str,
    ) -> Bytes {
        let started = Instant::now();
        let answered = self.subscription_answer(up, subs, body).await;
        self.log_message(up, request_id, started, &answered);
        answered.body.unwrap_or_default()
    }

    async fn subscription_answer(
        &self,
        up: &WsUpgrade,
        subs: &mut ClientSubscriptions,
        body: &[u8],
    ) -> Answered {
        let incoming = Incoming::parse(body);
        let logged = self.logged_method(up, &incoming);
        let cost = incoming.cost(&self.state.compute_units);
        if let Err(e) = self.limit_message(up, cost) {
            let mut refused = self.refuse(up, cost, body, &e);
            refused.method = logged;
            return refused;
        }
        let Some(method) = incoming.method() else {
            return Answered::refused(body, &ApiError::invalid_params("not a subscription call"));
        };
        if let Some(refused) = incoming.refusal() {
            return Answered::refused(body, &refused);
        }
        let id = incoming.id();
        let caller = self.rpc_caller(&up.principal);
        let no_params = Value::Array(Vec::new());
        let params = incoming.params().unwrap_or(&no_params);
        let (answer, status, error) = match self
            .subscription_call(up, subs, method, params, &caller)
            .await
        {
            Ok(result) => (Response::result(id, result), 200, None),
            Err(e) => (crate::rpc::error_from(&id, &e), e.status, Some(e.code)),
        };
        let answer = answer.to_bytes();
        self.count_answer(up, cost, Some(&answer));
        Answered {
            body: Some(answer),
            status,
            upstream: None,
            error,
            verified: None,
            method: logged,
        }
    }

    /// `eth_subscribe` (the edge's id of a shared subscription) or `eth_unsubscribe`
    /// (whether this connection held the id).
    async fn subscription_call(
        &self,
        up: &WsUpgrade,
        subs: &mut ClientSubscriptions,
        method: &str,
        params: &Value,
        caller: &crate::rpc::Caller<'_>,
    ) -> Result<Value, ApiError> {
        if method == "eth_unsubscribe" {
            let sub = params.get(0).and_then(Value::as_str).unwrap_or_default();
            return Ok(Value::Bool(subs.remove(sub)));
        }
        // What is checked below is what the node gets: the params rebuilt.
        let params = &crate::streams::subscribe_params::subscription_params(params)?;
        if let Some(refused) = caller.refusal(MethodClass::Subscription, method, Some(params)) {
            return Err(refused);
        }
        self.subscription_allowed(params, caller)?;
        if subs.is_full() {
            let max = subs.max();
            return Err(ApiError::new(
                429,
                "subscription_cap_exceeded",
                format!("a connection holds at most {max} subscriptions"),
            )
            .with_field("max_subscriptions", max));
        }
        let st = &*self.state;
        let pool = st.pools.get(&up.pool).ok_or_else(|| {
            ApiError::new(
                503,
                "pool_not_configured",
                format!("no {} pool is configured", up.pool),
            )
        })?;
        // The key-wide cap (across instances when clustered), held while the share lives.
        let (owner, plan) = owner_and_plan(&up.principal, up.client_ip);
        let cap = st.config.app.streams.websocket.max_key_subscriptions(plan);
        let place = st
            .ws_subscriptions()
            .take(owner, cap)
            .await
            .ok_or_else(|| {
                ApiError::new(
                    429,
                    "subscription_cap_exceeded",
                    format!("this key holds at most {cap} subscriptions at once"),
                )
                .with_field("max_subscriptions_per_key", cap)
            })?;
        let mut share = st.subscriptions().subscribe(pool, params).await?;
        share.hold(place);
        Ok(Value::String(subs.add(share)))
    }

    /// Which subscriptions the product offers, and to whom.
    fn subscription_allowed(
        &self,
        params: &Value,
        caller: &crate::rpc::Caller<'_>,
    ) -> Result<(), ApiError> {
        match params.get(0).and_then(Value::as_str) {
            Some("newHeads" | "logs") => Ok(()),
            Some("newPendingTransactions") => {
                match self
                    .state
                    .gateway
                    .conf
                    .plan_refusal(MethodClass::TxPool, caller)
                {
                    Some(required) => Err(self.tier_insufficient(
                        caller.plan,
                        required,
                        format!("newPendingTransactions needs plan {required} or above"),
                    )),
                    None => Ok(()),
                }
            }
            other => Err(ApiError::invalid_params(format!(
                "subscription {} is not offered ({})",
                other.unwrap_or("(none)"),
                KINDS.join(", ")
            ))),
        }
    }
}

/// Calls of one connection answered at once (beyond it, reading the next message waits).
const MAX_IN_FLIGHT: usize = 16;
/// The largest message a push channel's client may send (it sends nothing but control
/// frames).
const PUSH_MAX_MESSAGE: usize = 4096;

/// The held socket: one session on `io` (the client's bytes after the 101) until either
/// side ends it, for a JSON-RPC session and a push channel alike. A JSON-RPC session's
/// messages are calls; a push channel's client is only heard (control frames, idle
/// timeout), and its items come from the channel's source. Both: a bounded send queue
/// (a slow consumer is closed with 1008), ping and idle timeout, "going away" (1001) at
/// shutdown, and the end of the key's or token's lease.
pub async fn serve<S>(state: Arc<State>, mut up: Box<WsUpgrade>, io: S)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let edge = Edge { state, live: None };
    let mut push = up.push.take();
    let conf = edge.state.config.app.streams.websocket.clone();
    let (config, max_message) = socket_config(&edge.state, push.is_some());
    // Boxed (as is `up`): what a held session's task carries is the loop's state alone.
    let mut conn = Box::pin(WsConn::accept(io, config, conf.send_queue)).await;
    let mut subs = ClientSubscriptions::new(conf.max_subscriptions_per_connection);
    metrics::WS_SESSIONS.inc();
    let mut shutdown = crate::shutdown::server();
    let idle = Duration::from_secs(conf.idle_timeout_secs.max(1));
    let mut ping = tokio::time::interval(Duration::from_secs(conf.ping_interval_secs.max(1)));
    ping.tick().await;
    let mut heard = Instant::now();
    let mut n = 0u64;
    let mut in_flight = FuturesUnordered::new();
    let mut lease = up.lease(edge.state.keys());
    let slow = || {
        (
            CloseCode::Policy,
            "slow consumer: send buffer full".to_string(),
        )
    };
    let close: Option<(CloseCode, String)> = loop {
        tokio::select! {
            // At most MAX_IN_FLIGHT calls at once: past that, the client's next message
            // waits in the socket (back-pressure, not memory). Queued answers go out
            // either way.
            msg = conn.next(in_flight.len() < MAX_IN_FLIGHT) => {
                heard = Instant::now();
                let body = match Heard::of(msg) {
                    // A push channel's client is only heard.
                    Heard::Data(_) | Heard::Control if push.is_some() => continue,
                    Heard::Data(body) => body,
                    Heard::Control => continue,
                    Heard::Gone => break None,
                    Heard::TooLarge => {
                        break Some((CloseCode::Size, format!("messages are limited to {max_message} bytes")));
                    }
                };
                n += 1;
                let rid = format!("{}-{n}", up.request_id);
                if Edge::is_subscription_call(&body) {
                    let answer = Box::pin(edge.ws_subscription(&up, &mut subs, &body, &rid)).await;
                    if conn.send(text_or_binary(answer)).is_err() {
                        break Some(slow());
                    }
                } else {
                    // Calls run side by side (a slow one does not hold the next back);
                    // answers go out as they are ready, matched by id as JSON-RPC allows.
                    // Boxed: the call's future is large, and an idle session carries none.
                    in_flight.push(Box::pin(edge.ws_call(&up, body, rid)));
                }
            }
            Some(answer) = in_flight.next(), if !in_flight.is_empty() => {
                if let Some(answer) = answer {
                    if conn.send(text_or_binary(answer)).is_err() {
                        break Some(slow());
                    }
                }
            }
            item = next_item(&mut push, &mut subs) => match item {
                Item::Send(m) => {
                    if conn.send(m).is_err() {
                        break Some(slow());
                    }
                }
                Item::Lagged => break Some(slow()),
                Item::End(code, reason) => break Some((code, reason)),
            },
            _ = ping.tick() => {
                if heard.elapsed() > idle {
                    break Some((CloseCode::Normal, "idle timeout".into()));
                }
                if conn.send(Message::Ping(Bytes::new())).is_err() {
                    break Some(slow());
                }
            }
            _ = going_away(&mut shutdown) => {
                break Some((CloseCode::Away, "server restarting; reconnect".into()));
            }
            why = lease.ended(edge.state.keys()) => {
                break Some((CloseCode::Policy, why.into()));
            }
        }
    };
    drop((subs, push));
    metrics::WS_SESSIONS.dec();
    Box::pin(conn.finish(close)).await;
}

/// What a client's message comes to.
enum Heard {
    /// A text or binary message: a call, for a JSON-RPC session.
    Data(Bytes),
    /// A ping or pong (tungstenite answers pings itself).
    Control,
    /// A close, the end of the stream, or a broken one.
    Gone,
    /// Past the socket's message bound.
    TooLarge,
}

impl Heard {
    fn of(msg: Option<Result<Message, tokio_tungstenite::tungstenite::Error>>) -> Heard {
        match msg {
            Some(Ok(Message::Text(t))) => Heard::Data(Bytes::from(t)),
            Some(Ok(Message::Binary(b))) => Heard::Data(b),
            Some(Ok(Message::Close(_))) | None => Heard::Gone,
            Some(Ok(_)) => Heard::Control,
            Some(Err(tokio_tungstenite::tungstenite::Error::Capacity(_))) => Heard::TooLarge,
            Some(Err(_)) => Heard::Gone,
        }
    }
}

/// The socket's bounds: a JSON-RPC session's messages up to `rpc.max_body_bytes` and a
/// send buffer for two of its largest answers; a push channel's client sends nothing
/// but control frames.
fn socket_config(state: &State, push: bool) -> (WebSocketConfig, usize) {
    let rpc = &state.config.app.rpc;
    let (max_message, max_write) = match push {
        true => (PUSH_MAX_MESSAGE, 1 << 20),
        false => (
            rpc.max_body_bytes,
            rpc.max_response_bytes.saturating_mul(2).max(1 << 20),
        ),
    };
    let config = WebSocketConfig::default()
        // 1 KiB: most JSON-RPC messages fit; a larger one grows the buffer for itself.
        .read_buffer_size(1024)
        .write_buffer_size(0)
        .max_write_buffer_size(max_write)
        .max_message_size(Some(max_message))
        .max_frame_size(Some(max_message));
    (config, max_message)
}

/// What the server sends next of its own: a push channel's next item, or a JSON-RPC
/// session's next subscription notification.
async fn next_item(push: &mut Option<Box<dyn PushSource>>, subs: &mut ClientSubscriptions) -> Item {
    match push {
        Some(source) => source.next().await,
        None => match subs.next().await {
            Ok(note) => Item::Send(Message::text(note)),
            Err(Ended::Lagged) => Item::Lagged,
        },
    }
}

/// Answers and notifications are JSON, so text frames; bytes that are not UTF-8 (a
/// node's bad answer) go as binary rather than being altered.
fn text_or_binary(b: Bytes) -> Message {
    match Utf8Bytes::try_from(b.clone()) {
        Ok(t) => Message::Text(t),
        Err(_) => Message::Binary(b),
    }
}
