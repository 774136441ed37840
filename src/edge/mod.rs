//! The Pingora `ProxyHttp` implementation: the request pipeline, top to bottom in
//! `request_filter` — classify, CORS, authenticate, dispatch — and the access log.

pub mod cors;
pub mod downstream;
pub mod respond;

use crate::auth::{self, Principal};
use crate::config::Loaded;
use crate::errors::{ApiError, Envelope};
use crate::handlers::{self, metrics_mirror};
use crate::observe::{access_log, metrics};
use crate::pools::{Host, Pools};
use crate::routes::matcher::{Match, Matcher, NormalizedPath};
use crate::routes::spec::{Credential, HandlerKind};
use crate::routes::Route;
use crate::rpc::Gateway;
use async_trait::async_trait;
use bytes::Bytes;
pub use downstream::{Downstream, PreMatch};
use pingora_core::upstreams::peer::HttpPeer;
use pingora_core::{Error, ErrorType, Result};
use pingora_http::ResponseHeader;
use pingora_proxy::{ProxyHttp, Session};
use respond::Reply;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// Everything the edge needs, built once at start-up.
pub struct State {
    pub matcher: Matcher,
    pub config: Loaded,
    pub pools: Arc<Pools>,
    pub gateway: Gateway,
    pub keys: crate::auth::keys::KeyAuth,
    pub limiter: crate::limits::Limiter,
    pub metrics_cache: crate::handlers::metrics_mirror::MetricsCache,
    pub console: crate::console::Console,
    pub stream_slots: crate::handlers::mev_share::StreamSlots,
}

pub struct Edge {
    pub state: Arc<State>,
}

/// Per-request state carried across Pingora's phases.
pub struct Ctx {
    started: Instant,
    pub(crate) request_id: String,
    route: Option<Arc<Route>>,
    pub(crate) envelope: Envelope,
    cors_headers: Vec<(&'static str, String)>,
    pub(crate) upstream: Option<String>,
    pub(crate) error_code: Option<&'static str>,
    principal: Option<Principal>,
    /// `X-RateLimit-*` headers for an admitted, rate-limited request.
    rate_headers: Vec<(&'static str, String)>,
    /// `Set-Cookie` values (console sign-in, sliding refresh).
    cookies: Vec<String>,
    /// The beacon path and its policy, checked before authentication.
    beacon: Option<(String, crate::handlers::beacon::BeaconPolicy)>,
    /// A request handed to Pingora's proxy phases.
    pass: Option<Pass>,
    /// Values of the route's `{param}`s (a tail is the rest of the path).
    params: Vec<String>,
    /// The path had `.`/`..` or encoded-slash segments (tail routes only get this far).
    path_suspicious: bool,
}

/// A passthrough: the hosts to try in order, and the path under each host's base path.
pub struct Pass {
    pub(crate) hosts: Vec<Arc<Host>>,
    next: usize,
    /// Path (and query) relative to the host's base path; empty = the base path itself.
    rest: String,
    /// Long-lived (SSE, WebSocket): no read timeout, no compression.
    pub(crate) stream: bool,
    current: Option<Arc<Host>>,
}

impl Pass {
    /// The request target on a host whose URL path is `base`.
    pub(crate) fn upstream_path(&self, base: &str) -> String {
        if self.rest.is_empty() {
            base.to_string()
        } else {
            format!("{}/{}", base.trim_end_matches('/'), self.rest)
        }
    }
}

/// What the pipeline decided: answer here, proxy, or open the caller's MEV-Share stream.
pub(crate) enum Outcome {
    Reply(Reply),
    Proxy(Pass),
    /// Served on Pingora's session only: the lean front hands these routes over.
    MevShare {
        user: String,
    },
}

/// Read timeout toward nodes on ordinary passthroughs.
pub(crate) const PASS_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

impl Ctx {
    /// Headers the edge sets on every response of this request, local or proxied:
    /// `Server`, `X-Request-Id`, CORS, rate and cookies. On a node's answer they replace
    /// the node's own (`replaces`), except cookies, which add up.
    pub(crate) fn edge_headers(&self) -> impl Iterator<Item = (&'static str, &str)> {
        [
            ("Server", "chainedge"),
            ("X-Request-Id", self.request_id.as_str()),
        ]
        .into_iter()
        .chain(
            self.cors_headers
                .iter()
                .chain(self.rate_headers.iter())
                .map(|(k, v)| (*k, v.as_str())),
        )
        .chain(self.cookies.iter().map(|c| ("Set-Cookie", c.as_str())))
    }

    /// Whether a node's header `name` gives way to one of `edge_headers`.
    pub(crate) fn replaces(&self, name: &str) -> bool {
        self.edge_headers()
            .any(|(k, _)| k != "Set-Cookie" && k.eq_ignore_ascii_case(name))
    }

    fn route_name(&self) -> &str {
        self.route
            .as_ref()
            .map(|r| r.name.as_str())
            .unwrap_or("unmatched")
    }
}

#[async_trait]
impl ProxyHttp for Edge {
    type CTX = Ctx;

    fn new_ctx(&self) -> Ctx {
        Ctx {
            started: Instant::now(),
            request_id: String::new(),
            route: None,
            envelope: Envelope::ChainRest,
            cors_headers: Vec::new(),
            upstream: None,
            error_code: None,
            principal: None,
            rate_headers: Vec::new(),
            params: Vec::new(),
            path_suspicious: false,
            cookies: Vec::new(),
            beacon: None,
            pass: None,
        }
    }

    async fn request_filter(&self, session: &mut Session, ctx: &mut Ctx) -> Result<bool> {
        ctx.request_id = request_id(session.get_header("x-request-id").map(|v| v.as_bytes()));
        let reply = match self.pipeline(session, ctx).await {
            Ok(Outcome::Reply(reply)) => reply,
            Ok(Outcome::MevShare { user }) => match self.mev_share(session, ctx, &user).await {
                Ok(()) => return Ok(true),
                Err(e) => {
                    ctx.error_code = Some(e.code);
                    Reply::error(&e, ctx.envelope, &ctx.request_id)
                }
            },
            Ok(Outcome::Proxy(pass)) => {
                if pass.stream {
                    // SSE and WebSocket stay open as long as both ends want.
                    session.set_read_timeout(None);
                }
                ctx.pass = Some(pass);
                return Ok(false);
            }
            Err(e) => {
                ctx.error_code = Some(e.code);
                Reply::error(&e, ctx.envelope, &ctx.request_id)
            }
        };
        respond::write(session, ctx, reply).await?;
        Ok(true)
    }

    /// Passthroughs only: the next host in the pass's order (called again on each retry).
    async fn upstream_peer(&self, session: &mut Session, ctx: &mut Ctx) -> Result<Box<HttpPeer>> {
        let Some(pass) = ctx.pass.as_mut() else {
            return Error::e_explain(ErrorType::InternalError, "no passthrough route selected");
        };
        let Some(host) = pass.hosts.get(pass.next).cloned() else {
            ctx.error_code = Some("upstream_unavailable");
            return Error::e_explain(ErrorType::ConnectNoRoute, "every host of the pool failed");
        };
        pass.next += 1;
        let mut peer = host.endpoint(session.is_upgrade_req()).1.clone();
        peer.options.read_timeout = if pass.stream {
            None
        } else {
            Some(PASS_READ_TIMEOUT)
        };
        metrics::upstream_attempt(&host.pool, &host.id);
        ctx.upstream = Some(host.id.clone());
        pass.current = Some(host);
        Ok(Box::new(peer))
    }

    /// Nothing reached the node yet: try the next host, if any.
    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut Ctx,
        mut e: Box<Error>,
    ) -> Box<Error> {
        if let Some(pass) = ctx.pass.as_ref() {
            if let Some(h) = &pass.current {
                h.record_failure(&format!("connect: {e}"));
                metrics::upstream_failure(&h.pool, &h.id, "connect");
            }
            if pass.next < pass.hosts.len() {
                e.set_retry(true);
            }
        }
        e
    }

    /// The node failed mid-exchange. A GET whose answer has not started downstream is
    /// safe to send to the next host; anything else is not retried.
    fn error_while_proxy(
        &self,
        peer: &HttpPeer,
        session: &mut Session,
        e: Box<Error>,
        ctx: &mut Ctx,
        _client_reused: bool,
    ) -> Box<Error> {
        let mut e = e.more_context(format!("peer {peer}"));
        let idempotent = session.req_header().method == http::Method::GET;
        if let Some(pass) = ctx.pass.as_ref() {
            if let Some(h) = &pass.current {
                h.record_failure(&format!("proxy: {e}"));
                metrics::upstream_failure(&h.pool, &h.id, "transport");
            }
            let more = pass.next < pass.hosts.len();
            e.set_retry(idempotent && more && session.response_written().is_none());
        }
        e
    }

    /// Toward the node: its own path and Host, its secret headers, and never the
    /// caller's credentials.
    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        req: &mut pingora_http::RequestHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        let Some(pass) = ctx.pass.as_ref() else {
            return Ok(());
        };
        let Some(host) = pass.current.as_ref() else {
            return Ok(());
        };
        let addr = host.endpoint(session.is_upgrade_req()).0;
        let path = pass.upstream_path(&addr.path);
        let uri = path
            .parse::<http::Uri>()
            .map_err(|e| Error::explain(ErrorType::InternalError, format!("upstream path: {e}")))?;
        req.set_uri(uri);
        let sent_xff = Downstream::header(session, "x-forwarded-for").map(str::to_string);
        let options = connection_options(
            &req.headers
                .get_all("connection")
                .iter()
                .map(|v| v.as_bytes())
                .collect::<Vec<_>>(),
        );
        let upgrade = session.is_upgrade_req() && ctx.route.as_ref().is_some_and(|r| r.websocket);
        for name in &options {
            // An upgrade on a WebSocket route keeps `Upgrade` (Pingora relays it).
            if !(upgrade && name == "upgrade") {
                req.remove_header(name.as_str());
            }
        }
        if !upgrade {
            req.remove_header("upgrade");
            req.remove_header("connection");
        }
        for h in CALLER_ONLY_HEADERS {
            req.remove_header(*h);
        }
        if let Some(peer) = Downstream::client_ip(session) {
            let trusted = self.state.console.trusts(Some(peer));
            let peer = peer.to_string();
            let xff = forwarded_for(trusted, &peer, sent_xff.as_deref());
            req.insert_header("X-Forwarded-For", xff.into_owned())?;
        }
        if pass.stream {
            req.remove_header("accept-encoding");
        }
        req.insert_header("Host", addr.authority())?;
        req.insert_header("X-Request-Id", ctx.request_id.as_str())?;
        for (name, value) in &host.headers {
            req.insert_header(name.clone(), value.expose())?;
        }
        Ok(())
    }

    /// A passthrough that could not be completed: our envelope, not Pingora's bare page.
    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut Ctx,
    ) -> pingora_proxy::FailToProxy {
        let code = match e.etype() {
            ErrorType::HTTPStatus(c) => *c,
            _ => match e.esource() {
                pingora_core::ErrorSource::Upstream => 502,
                pingora_core::ErrorSource::Downstream => match e.etype() {
                    ErrorType::WriteError | ErrorType::ReadError | ErrorType::ConnectionClosed => 0,
                    _ => 400,
                },
                _ => 502,
            },
        };
        if code > 0 && session.response_written().is_none() {
            let err = match code {
                502..=504 => {
                    ctx.error_code = Some("upstream_unavailable");
                    ApiError::no_node_answered()
                }
                400 => ApiError::new(400, "bad_request", "malformed request"),
                c => ApiError::new(c, "upstream_error", "the node refused the request"),
            };
            let reply = Reply::error(&err, ctx.envelope, &ctx.request_id);
            let _ = respond::write(session, ctx, reply).await;
        }
        pingora_proxy::FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    async fn response_filter(
        &self,
        session: &mut Session,
        resp: &mut ResponseHeader,
        ctx: &mut Ctx,
    ) -> Result<()> {
        // A switch of protocols only where the client asked for one on a WebSocket route.
        if resp.status == http::StatusCode::SWITCHING_PROTOCOLS
            && !(session.is_upgrade_req() && ctx.route.as_ref().is_some_and(|r| r.websocket))
        {
            return Error::e_explain(
                ErrorType::InvalidHTTPHeader,
                "node answered 101 to a request that did not ask to upgrade",
            );
        }
        let node_cookies: Vec<http::HeaderValue> =
            resp.headers.get_all("set-cookie").iter().cloned().collect();
        if node_cookies
            .iter()
            .any(|c| sets_console_cookie(c.as_bytes()))
        {
            resp.remove_header("set-cookie");
            for c in node_cookies
                .into_iter()
                .filter(|c| !sets_console_cookie(c.as_bytes()))
            {
                resp.append_header("set-cookie", c)?;
            }
        }
        for (k, v) in ctx.edge_headers() {
            // Ours replace a node's own; cookies add up.
            if k == "Set-Cookie" {
                resp.append_header(k, v)?;
            } else {
                resp.insert_header(k, v)?;
            }
        }
        Ok(())
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut Ctx) {
        let status = session
            .response_written()
            .map(|h| h.status.as_u16())
            .unwrap_or(0);
        let client = session
            .client_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        let err_text = e.map(|e| e.to_string());
        let req = session.req_header();
        self.request_done(
            ctx,
            req.method.as_str(),
            req.uri.path(),
            &client,
            status,
            err_text.as_deref(),
        );
    }
}

impl Edge {
    /// Metrics and the access log line of a finished request (`status` 0: no answer sent).
    pub(crate) fn request_done(
        &self,
        ctx: &Ctx,
        method: &str,
        path: &str,
        client: &str,
        status: u16,
        error: Option<&str>,
    ) {
        let elapsed = ctx.started.elapsed().as_secs_f64();
        metrics::request_done(ctx.route_name(), status, elapsed);
        access_log::with_timestamp(|ts| {
            access_log::write(&access_log::AccessLine {
                ts,
                request_id: &ctx.request_id,
                client,
                method,
                path,
                route: ctx.route_name(),
                surface: ctx.route.as_ref().map(|r| r.surface.as_str()).unwrap_or(""),
                tenant: match &ctx.principal {
                    Some(Principal::Key(k)) => Some(k.tenant_id.as_str()),
                    _ => None,
                },
                key_id: match &ctx.principal {
                    Some(Principal::Key(k)) => Some(k.key_id.as_str()),
                    _ => None,
                },
                user: match &ctx.principal {
                    Some(Principal::Key(k)) => k.user_id.as_deref(),
                    Some(Principal::User(s)) => Some(s.user_id.as_str()),
                    _ => None,
                },
                status,
                latency_us: (elapsed * 1e6).round() as u64,
                upstream: ctx.upstream.as_deref(),
                error: ctx.error_code.or(error),
            })
        });
    }
}

impl Edge {
    /// classify → CORS → authenticate → dispatch. Any refusal is an `ApiError`.
    pub(crate) async fn pipeline<D: Downstream + ?Sized>(
        &self,
        session: &mut D,
        ctx: &mut Ctx,
    ) -> Result<Outcome, ApiError> {
        let st = &*self.state;
        if !session.host_is_valid() {
            return Err(ApiError::new(
                400,
                "bad_request",
                "missing or repeated Host header",
            ));
        }
        let method = session.method().to_string();
        let pre = session.take_match();
        let origin = session.header("origin").map(str::to_string);

        // CORS preflight: answered from the policy of the route the real request would hit.
        if method == "OPTIONS" {
            if let (Some(origin), Some(wanted)) =
                (&origin, session.header("access-control-request-method"))
            {
                let wanted = wanted.to_string();
                let path = NormalizedPath::parse(session.path());
                let route = self.classify(ctx, &wanted, &path, false)?;
                let same = self.same_origin(session, origin);
                return match cors::check(&route, Some(origin), self.console_origin(), same) {
                    cors::Verdict::Allow(mut h) => {
                        h.extend(cors::preflight_headers(&route));
                        Ok(Outcome::Reply(Reply::empty(204).with_headers(h)))
                    }
                    _ => Err(ApiError::new(
                        403,
                        "origin_not_allowed",
                        format!("origin {origin} may not call this route"),
                    )),
                };
            }
        }

        let upgrade = session.is_upgrade();
        let route = match pre {
            Some(m) => self.found(ctx, m)?,
            None => {
                let path = NormalizedPath::parse(session.path());
                self.classify(ctx, &method, &path, upgrade)?
            }
        };
        let same = origin
            .as_deref()
            .is_some_and(|o| self.same_origin(session, o));
        match cors::check(&route, origin.as_deref(), self.console_origin(), same) {
            cors::Verdict::Allow(h) => ctx.cors_headers = h,
            cors::Verdict::Deny if route.cors != crate::routes::spec::CorsPolicy::None => {
                return Err(ApiError::new(
                    403,
                    "origin_not_allowed",
                    "this origin may not call this route",
                ))
            }
            _ => {}
        }
        if !route.enabled {
            return Err(ApiError::new(
                503,
                "route_disabled",
                format!("{} is switched off", route.name),
            ));
        }
        if let Some(switch) = &route.switch {
            if !st.config.switch(switch) {
                return Err(ApiError::new(
                    503,
                    "route_disabled",
                    format!(
                        "{} is off until the {} switch is enabled",
                        route.name,
                        switch.to_ascii_uppercase()
                    ),
                ));
            }
        }

        // Beacon paths are checked (traversal, group) before anything else is done.
        if matches!(
            route.handler,
            HandlerKind::BeaconProxy | HandlerKind::BeaconEvents
        ) {
            ctx.beacon = Some(crate::handlers::beacon::policy(
                session.path(),
                "/rpc/eth-beacon",
            )?);
        }

        let principal = self.authenticate(session, &route).await?;
        let mut category = route.rate.clone();
        if let Some((_, pol)) = &ctx.beacon {
            if let Principal::Key(rec) = &principal {
                self.require_plan(rec, pol.min_plan)?;
            }
            category = Some(pol.rate.to_string());
        }
        if let Principal::User(s) = &principal {
            // SPEC order: session first (401), then the double-submit CSRF check (403).
            crate::console::check_csrf(&method, s.csrf.as_deref(), session.header("x-csrf-token"))?;
            let cookies = session.cookies();
            let token = crate::console::cookie(cookies.as_deref(), crate::console::SESSION_COOKIE);
            ctx.cookies = st.console.refresh(s, self.secure(session), token).await;
        }
        if let Some(category) = &category {
            self.limit(session, ctx, &principal, category)?;
        }
        ctx.principal = Some(principal);
        self.dispatch(session, ctx, &route).await
    }

    /// Record a matched route in the context; traversal outside tail routes is refused.
    fn found(&self, ctx: &mut Ctx, m: PreMatch) -> Result<Arc<Route>, ApiError> {
        ctx.params = m.params;
        ctx.path_suspicious = m.suspicious;
        ctx.envelope = m.route.envelope;
        ctx.route = Some(m.route.clone());
        if m.suspicious && !m.route.has_tail() {
            return Err(ApiError::new(
                400,
                "invalid_path",
                "path segments may not be '.', '..' or contain encoded slashes",
            ));
        }
        Ok(m.route)
    }

    /// Match the route and record it in the context; 404 / 405 / traversal refusals.
    fn classify(
        &self,
        ctx: &mut Ctx,
        method: &str,
        path: &NormalizedPath,
        upgrade: bool,
    ) -> Result<Arc<Route>, ApiError> {
        match self.state.matcher.find(method, path, upgrade) {
            Match::Found { route, params } => self.found(
                ctx,
                PreMatch {
                    route: route.clone(),
                    params,
                    suspicious: path.suspicious,
                },
            ),
            Match::MethodNotAllowed { routes } => {
                let first = routes[0];
                ctx.route = Some(first.clone());
                ctx.envelope = first.envelope;
                if method == "GET" && routes.iter().any(|r| r.websocket) {
                    return Err(ApiError::new(
                        426,
                        "upgrade_required",
                        "this route is a WebSocket channel",
                    )
                    .with_header("Upgrade", "websocket"));
                }
                let mut methods: Vec<&str> = routes
                    .iter()
                    .flat_map(|r| r.all_methods())
                    .map(|m| m.as_str())
                    .collect();
                methods.sort();
                methods.dedup();
                let allow = methods.join(", ");
                let mut e = ApiError::method_not_allowed(&allow);
                if first.envelope == Envelope::Admin {
                    e.message = format!("only {allow} supported");
                }
                Err(e)
            }
            Match::NotFound => Err(ApiError::route_not_found()),
        }
    }

    async fn authenticate<D: Downstream + ?Sized>(
        &self,
        session: &D,
        route: &Route,
    ) -> Result<Principal, ApiError> {
        let st = &*self.state;
        let admin = || {
            auth::admin(
                session.client_ip(),
                session.header("x-admin-token").map(str::as_bytes),
                st.config.admin_token.as_ref(),
            )
        };
        match route.credential {
            Credential::Admin => admin(),
            Credential::None => Ok(Principal::Anonymous),
            Credential::Session => {
                let cookies = session.cookies();
                let s = st
                    .console
                    .resolve(cookies.as_deref(), self.secure(session))
                    .await?;
                Ok(Principal::User(Arc::new(s)))
            }
            Credential::ApiKey
            | Credential::OptionalApiKey
            | Credential::Bearer
            | Credential::AdminOrApiKey => {
                if route.credential == Credential::AdminOrApiKey {
                    if let Ok(p) = admin() {
                        return Ok(p);
                    }
                }
                let secret = auth::keys::presented(
                    session.header("authorization"),
                    session.header("x-token"),
                    route.credential == Credential::Bearer,
                )?;
                let Some(secret) = secret else {
                    if route.credential == Credential::OptionalApiKey {
                        return Ok(Principal::Anonymous);
                    }
                    return Err(ApiError::new(
                        401,
                        "unauthorized",
                        "an API key is required (Authorization: Bearer <key>)",
                    ));
                };
                let rec = st
                    .keys
                    .resolve(secret)
                    .await?
                    .ok_or_else(|| ApiError::new(401, "unauthorized", "unknown API key"))?;
                auth::check_standing(&rec, crate::store::now())?;
                self.authorize(route, &rec)?;
                Ok(Principal::Key(rec))
            }
        }
    }

    /// A plan's rank in the configured order (lowest first); `None` for an unknown plan.
    fn plan_rank(&self, plan: &str) -> Option<usize> {
        self.state.config.app.plans.iter().position(|p| p == plan)
    }

    /// Plan ("X and above"), scopes and features of the route against the key's tenant.
    fn authorize(&self, route: &Route, rec: &crate::store::KeyRecord) -> Result<(), ApiError> {
        let rank = self.plan_rank(&rec.plan).unwrap_or(0);
        let streams = route.envelope == Envelope::Stream;
        if let (Some(min), Some(required)) = (route.min_plan, &route.min_plan_name) {
            if rank < min {
                if streams {
                    return Err(ApiError::new(
                        403,
                        "tier_locked",
                        format!("plan {} does not include this route", rec.plan),
                    ));
                }
                return Err(self.tier_insufficient(
                    &rec.plan,
                    required,
                    format!("this route needs plan {required} or above"),
                ));
            }
        }
        if let Some(scope) = route.scopes.iter().find(|s| !rec.scopes.contains(s)) {
            let required = route.min_plan_name.as_deref().unwrap_or(&rec.plan);
            return Err(self
                .tier_insufficient(
                    &rec.plan,
                    required,
                    format!("this API key lacks the scope {scope}"),
                )
                .with_field("required_scope", scope.as_str()));
        }
        if let Some(feature) = route.features.iter().find(|f| !rec.features.contains(f)) {
            return Err(ApiError::new(
                403,
                if streams {
                    "tier_locked"
                } else {
                    "tier_insufficient"
                },
                format!("plan lacks the feature {feature}"),
            ));
        }
        Ok(())
    }

    /// The tier × category rate limit; admins are not limited.
    fn limit<D: Downstream + ?Sized>(
        &self,
        session: &D,
        ctx: &mut Ctx,
        principal: &Principal,
        category: &str,
    ) -> Result<(), ApiError> {
        self.limit_weighted(session, ctx, principal, category, 1)
    }

    /// `weight` requests at once: each call of a JSON-RPC batch counts.
    fn limit_weighted<D: Downstream + ?Sized>(
        &self,
        session: &D,
        ctx: &mut Ctx,
        principal: &Principal,
        category: &str,
        weight: u32,
    ) -> Result<(), ApiError> {
        let (caller, tier) = match principal {
            Principal::Admin | Principal::User(_) => return Ok(()),
            Principal::Key(rec) => (
                crate::limits::Caller::Tenant {
                    id: &rec.tenant_id,
                    rank: self.plan_rank(&rec.plan).unwrap_or(0),
                },
                rec.plan.as_str(),
            ),
            Principal::Anonymous => (
                crate::limits::Caller::Address(
                    session
                        .client_ip()
                        .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)),
                ),
                crate::config::limits::ANONYMOUS,
            ),
        };
        let d = self.state.limiter.check_weighted(&caller, category, weight);
        let limit = format_rps(d.limit_rps);
        if d.admitted {
            ctx.rate_headers = vec![
                ("X-RateLimit-Limit", limit),
                ("X-RateLimit-Remaining", d.remaining.to_string()),
            ];
            return Ok(());
        }
        Err(ApiError::new(
            429,
            "rate_limited",
            format!("over {limit} requests/s for {category} on plan {tier}"),
        )
        .with_field("retry_after_sec", d.retry_after_sec)
        .with_field("limit_rps", d.limit_rps)
        .with_field("current_tier", tier)
        .with_field("category", category)
        .with_header("Retry-After", d.retry_after_sec.to_string())
        .with_header("X-RateLimit-Limit", limit)
        .with_header("X-RateLimit-Remaining", "0")
        .with_header("X-RateLimit-Reset", d.retry_after_sec.to_string()))
    }

    fn tier_insufficient(&self, current: &str, required: &str, message: String) -> ApiError {
        ApiError::new(403, "tier_insufficient", message)
            .with_field("current_tier", current)
            .with_field("required_tier", required)
            .with_field("upgrade_url", self.state.config.app.upgrade_url.as_str())
            .with_header("X-Required-Tier", required.to_string())
    }

    /// Passthroughs become a `Pass` for Pingora's proxy phases; the rest answer here.
    async fn dispatch<D: Downstream + ?Sized>(
        &self,
        session: &mut D,
        ctx: &mut Ctx,
        route: &Arc<Route>,
    ) -> Result<Outcome, ApiError> {
        match route.handler {
            // JSON-RPC over WebSocket: proxied to a ws-capable host, frames untouched.
            HandlerKind::JsonRpc if session.is_upgrade() && route.websocket => {
                let pool = self.pool(route.pool.as_deref().unwrap_or("eth_el"))?;
                let hosts = pool.candidates(Some("ws"));
                Ok(Outcome::Proxy(self.pass(
                    pool,
                    hosts,
                    String::new(),
                    true,
                )?))
            }
            HandlerKind::BeaconProxy | HandlerKind::BeaconEvents => {
                let (rest, pol) = ctx.beacon.clone().ok_or_else(ApiError::route_not_found)?;
                let pool = self.passthrough_pool(route)?;
                let hosts = pool
                    .candidates(None)
                    .into_iter()
                    .filter(|h| pol.families.is_none_or(|f| f.contains(&h.family.as_str())))
                    .collect();
                let rest = match session.query() {
                    Some(q) => format!("{rest}?{q}"),
                    None => rest,
                };
                Ok(Outcome::Proxy(self.pass(pool, hosts, rest, pol.stream)?))
            }
            // Base portal channels: WebSocket frames go to the portal pool untouched.
            HandlerKind::BasePortalWs => {
                let pool = self.passthrough_pool(route)?;
                let rest = session.path().trim_start_matches('/').to_string();
                let hosts = pool.candidates(None);
                Ok(Outcome::Proxy(self.pass(pool, hosts, rest, true)?))
            }
            // The route's tail, raw as the client sent it, to the route's pool.
            HandlerKind::Passthrough | HandlerKind::HeimdallProxy => {
                if ctx.path_suspicious {
                    return Err(ApiError::new(
                        400,
                        "invalid_path",
                        "path segments may not be '.', '..' or contain encoded slashes",
                    ));
                }
                let pool = self.passthrough_pool(route)?;
                let tail = raw_tail(session.path(), route.segments_before_tail());
                let rest = match session.query() {
                    Some(q) => format!("{tail}?{q}"),
                    None => tail.to_string(),
                };
                let hosts = pool.candidates(None);
                Ok(Outcome::Proxy(self.pass(pool, hosts, rest, false)?))
            }
            HandlerKind::RelayData => {
                let tail = ctx.params.last().cloned().unwrap_or_default();
                let rest = handlers::relay::check(&tail, session.query())?;
                let pool = self.passthrough_pool(route)?;
                let hosts = pool.candidates(None);
                Ok(Outcome::Proxy(self.pass(pool, hosts, rest, false)?))
            }
            HandlerKind::MevShareSse => {
                let user = match &ctx.principal {
                    Some(Principal::Key(k)) => {
                        k.user_id.clone().unwrap_or_else(|| k.tenant_id.clone())
                    }
                    _ => return Err(ApiError::new(401, "unauthorized", "a key is required")),
                };
                Ok(Outcome::MevShare { user })
            }
            _ => self
                .dispatch_local(session, ctx, route)
                .await
                .map(Outcome::Reply),
        }
    }

    /// The caller's MEV-Share event stream, written on Pingora's session as it arrives.
    async fn mev_share(
        &self,
        session: &mut Session,
        ctx: &mut Ctx,
        user: &str,
    ) -> Result<(), ApiError> {
        let st = &*self.state;
        let pool = st.pools.get("eth_mev_share").cloned();
        let headers = ctx.cors_headers.clone();
        ctx.upstream = handlers::mev_share::serve(
            session,
            &st.stream_slots,
            user,
            pool.as_deref(),
            &st.gateway.client,
            &st.config.app.streams,
            &ctx.request_id,
            &headers,
        )
        .await?;
        Ok(())
    }

    fn passthrough_pool(&self, route: &Route) -> Result<&crate::pools::Pool, ApiError> {
        self.pool(route.passthrough_pool().unwrap_or_default())
    }

    /// A pool by name, borrowed (no reference count touched on the request path).
    fn pool(&self, name: &str) -> Result<&crate::pools::Pool, ApiError> {
        self.state.pools.get(name).map(|p| &**p).ok_or_else(|| {
            ApiError::new(
                503,
                "pool_not_configured",
                format!("no {name} pool is configured"),
            )
        })
    }

    fn pass(
        &self,
        pool: &crate::pools::Pool,
        hosts: Vec<Arc<Host>>,
        rest: String,
        stream: bool,
    ) -> Result<Pass, ApiError> {
        if hosts.is_empty() {
            return Err(ApiError::new(
                503,
                "no_upstream",
                format!("no healthy host in pool {} can serve this route", pool.name),
            ));
        }
        Ok(Pass {
            hosts,
            next: 0,
            rest,
            stream,
            current: None,
        })
    }

    /// "X and above" against the key's plan, for checks finer than the route's own tier.
    fn require_plan(&self, rec: &crate::store::KeyRecord, required: &str) -> Result<(), ApiError> {
        match (self.plan_rank(&rec.plan), self.plan_rank(required)) {
            (Some(have), Some(need)) if have >= need => Ok(()),
            (_, None) => Ok(()),
            _ => Err(self.tier_insufficient(
                &rec.plan,
                required,
                format!("this path needs plan {required} or above"),
            )),
        }
    }

    /// A JSON-RPC body through the gateway: bounded read, each call of a batch counted
    /// against the rate limit, per-family plans for the caller.
    async fn json_rpc<D: Downstream + ?Sized>(
        &self,
        session: &mut D,
        ctx: &mut Ctx,
        route: &Route,
        pool: &crate::pools::Pool,
    ) -> Result<Reply, ApiError> {
        let st = &*self.state;
        let body = session.read_body(st.config.app.rpc.max_body_bytes).await?;
        // The request already counted once; a batch's other calls count too.
        let calls = batch_len(&body);
        if calls > 1 {
            if let (Some(category), Some(principal)) = (&route.rate, ctx.principal.clone()) {
                self.limit_weighted(session, ctx, &principal, category, calls - 1)?;
            }
        }
        let (rank, plan) = match &ctx.principal {
            Some(Principal::Key(k)) => (self.plan_rank(&k.plan).unwrap_or(0), k.plan.as_str()),
            // Admins (per-host RPC) are not bound by plans.
            _ => (usize::MAX, "admin"),
        };
        let caller = crate::rpc::Caller { rank, plan };
        let reply = st
            .gateway
            .handle(pool, &body, &ctx.request_id, &caller)
            .await?;
        ctx.upstream = reply.upstream;
        Ok(Reply::json(200, reply.body))
    }

    async fn dispatch_local<D: Downstream + ?Sized>(
        &self,
        session: &mut D,
        ctx: &mut Ctx,
        route: &Arc<Route>,
    ) -> Result<Reply, ApiError> {
        let st = &*self.state;
        match route.handler {
            HandlerKind::JsonRpc => {
                let pool = self.pool(route.pool.as_deref().unwrap_or("eth_el"))?;
                self.json_rpc(session, ctx, route, pool).await
            }
            // `edge_only`: an origin gateway has no such route (405 `Allow: POST` instead).
            HandlerKind::BasePage => {
                let mut r = Reply::json(200, BASE_PAGE.as_bytes().to_vec());
                r.content_type = Some("text/html; charset=utf-8");
                Ok(r.with_headers(vec![("Cache-Control", "public, max-age=3600".into())]))
            }
            HandlerKind::ConsolePage => {
                crate::console::page::serve(ctx.params.last().map(String::as_str).unwrap_or(""))
            }
            kind if kind.is_console_api() => {
                let body = if session.method() == "GET" {
                    Bytes::new()
                } else {
                    session.read_body(CONSOLE_MAX_BODY).await?
                };
                let user = match &ctx.principal {
                    Some(Principal::User(s)) => Some(s.clone()),
                    _ => None,
                };
                let cookies = session.cookies();
                let req = crate::console::api::Req {
                    kind,
                    session: user.as_deref(),
                    params: &ctx.params,
                    body,
                    secure: self.secure(session),
                    query: session.query(),
                    cookies: cookies.as_deref(),
                    request_id: &ctx.request_id,
                };
                crate::console::api::handle(&st.console, &st.keys, req).await
            }
            // An operator (or enterprise key) asking one node: the gateway on a pool
            // pinned to that host.
            HandlerKind::HostRpc => {
                let host_id = ctx.params.first().cloned().unwrap_or_default();
                let pool = self.pool(route.pool.as_deref().unwrap_or("eth_el"))?;
                let host = pool.host(&host_id).cloned().ok_or_else(|| {
                    ApiError::new(
                        404,
                        "unknown_host",
                        format!("no host {host_id} in {}", pool.name),
                    )
                })?;
                self.json_rpc(session, ctx, route, &pool.pinned_to(&host))
                    .await
            }
            HandlerKind::EthSenderRaw => {
                let body = session.read_body(st.config.app.rpc.max_body_bytes).await?;
                let (raw, preferred) = handlers::sender::parse_raw(&body)?;
                let call = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "eth_sendRawTransaction", "params": [raw]});
                let private = st.pools.get("eth_private_rpc").cloned();
                let (answer, path) = match (preferred, private) {
                    ("private", None) => {
                        return Err(ApiError::new(
                            503,
                            "pool_not_configured",
                            "no eth_private_rpc pool is configured",
                        ))
                    }
                    ("private", Some(p)) => {
                        let r = st
                            .gateway
                            .forward(
                                p.candidates(None),
                                call.to_string().as_bytes(),
                                crate::rpc::PRIVATE_TX_METHODS,
                                &ctx.request_id,
                            )
                            .await?;
                        ctx.upstream = r.upstream;
                        (
                            serde_json::from_slice(&r.body).unwrap_or_default(),
                            "private",
                        )
                    }
                    _ => {
                        let pool = self.pool("eth_el")?;
                        let (v, host) = st.gateway.write(pool, &call, &ctx.request_id).await?;
                        ctx.upstream = host;
                        (v, "public")
                    }
                };
                match answer.get("result").and_then(|r| r.as_str()) {
                    Some(hash) => Ok(Reply::json(
                        200,
                        serde_json::to_vec(
                            &serde_json::json!({"tx_hash": hash, "path_used": path}),
                        )
                        .unwrap_or_default(),
                    )),
                    None => Err(ApiError::new(
                        400,
                        "tx_rejected",
                        answer
                            .pointer("/error/message")
                            .and_then(|m| m.as_str())
                            .unwrap_or("the node refused the transaction")
                            .to_string(),
                    )),
                }
            }
            HandlerKind::EthSenderBundle => {
                let body = session.read_body(st.config.app.rpc.max_body_bytes).await?;
                let call = handlers::sender::bundle_call(&body)?;
                let pool = self.pool("eth_mev_builder")?;
                let r = st
                    .gateway
                    .forward(
                        pool.candidates(None),
                        call.to_string().as_bytes(),
                        crate::rpc::BUILDER_METHODS,
                        &ctx.request_id,
                    )
                    .await?;
                ctx.upstream = r.upstream;
                let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap_or_default();
                match v.pointer("/result/bundleHash").and_then(|h| h.as_str()) {
                    Some(h) => Ok(Reply::json(
                        200,
                        serde_json::to_vec(&serde_json::json!({"bundle_hash": h}))
                            .unwrap_or_default(),
                    )),
                    None => Err(ApiError::new(
                        400,
                        "bundle_rejected",
                        v.pointer("/error/message")
                            .and_then(|m| m.as_str())
                            .unwrap_or("the builder refused the bundle")
                            .to_string(),
                    )),
                }
            }
            HandlerKind::BuilderRpc | HandlerKind::PrivateRpc => {
                let (pool_name, allow) = if route.handler == HandlerKind::BuilderRpc {
                    ("eth_mev_builder", crate::rpc::BUILDER_METHODS)
                } else {
                    ("eth_private_rpc", crate::rpc::PRIVATE_TX_METHODS)
                };
                let pool = self.pool(pool_name)?;
                let body = session.read_body(st.config.app.rpc.max_body_bytes).await?;
                let reply = st
                    .gateway
                    .forward(pool.candidates(None), &body, allow, &ctx.request_id)
                    .await?;
                ctx.upstream = reply.upstream;
                Ok(Reply::json(200, reply.body))
            }
            HandlerKind::MeshHealth => Ok(mesh_reply(
                handlers::mesh::health(&st.pools, &handlers::mesh::ETH),
                handlers::mesh::ETH.source,
            )),
            HandlerKind::PolygonMeshHealth => Ok(mesh_reply(
                handlers::mesh::health(&st.pools, &handlers::mesh::POLYGON),
                handlers::mesh::POLYGON.source,
            )),
            HandlerKind::MeshHosts => Ok(mesh_reply(
                handlers::mesh::hosts(&st.pools),
                handlers::mesh::ETH.source,
            )),
            HandlerKind::MetricsMirror | HandlerKind::PolygonMetricsMirror => {
                let chain = if route.handler == HandlerKind::MetricsMirror {
                    metrics_mirror::Chain::Eth
                } else {
                    metrics_mirror::Chain::Polygon
                };
                let key = match &ctx.principal {
                    Some(Principal::Key(k)) => Some(&**k),
                    _ => None,
                };
                let tail = ctx.params.last().map(String::as_str).unwrap_or("");
                let host = metrics_mirror::resolve(
                    chain,
                    &st.pools,
                    session.path(),
                    ctx.path_suspicious,
                    tail,
                    key,
                )?;
                ctx.upstream = Some(host.id.clone());
                let (body, cache) = st.metrics_cache.get(host, &ctx.request_id).await?;
                Ok(Reply {
                    status: 200,
                    content_type: Some("text/plain; version=0.0.4; charset=utf-8"),
                    headers: vec![("X-Cache-Status", cache.to_string())],
                    body,
                })
            }
            _ => Err(ApiError::not_implemented(&route.name)),
        }
    }

    /// Whether cookies set on this response get `Secure`.
    fn secure<D: Downstream + ?Sized>(&self, session: &D) -> bool {
        self.state.console.secure(
            session.is_tls(),
            session.client_ip(),
            session.header("x-forwarded-proto"),
        )
    }

    /// Whether `origin` is this gateway itself (scheme of the connection + `Host`).
    fn same_origin<D: Downstream + ?Sized>(&self, session: &D, origin: &str) -> bool {
        let Some(host) = session.authority() else {
            return false;
        };
        let scheme = if session.is_tls() {
            "https://"
        } else {
            "http://"
        };
        origin.strip_prefix(scheme) == Some(host)
    }

    fn console_origin(&self) -> Option<&str> {
        self.state.config.app.console.origin.as_deref()
    }
}

/// What a person opening `/rpc/base` in a browser sees at the edge.
const BASE_PAGE: &str = "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
<title>Base JSON-RPC endpoint - chainedge</title>\
<meta name=\"description\" content=\"Base mainnet (chain id 8453) JSON-RPC and WebSocket endpoint by chainedge.\">\
</head><body><h1>Base mainnet JSON-RPC</h1>\
<p>This is a JSON-RPC endpoint for Base mainnet (chain id 8453, <code>0x2105</code>). \
Send <code>POST</code> requests with an API key in <code>Authorization: Bearer</code> or <code>x-token</code>; \
WebSocket clients connect to the same URL or <code>/ws/base</code>.</p></body></html>\n";

/// Caller credentials, console headers and forwarding headers the edge sets itself never
/// travel to a node as the caller sent them.
pub(crate) const CALLER_ONLY_HEADERS: &[&str] = &[
    "authorization",
    "proxy-authorization",
    "x-token",
    "cookie",
    "x-admin-token",
    "x-csrf-token",
    "x-forwarded-for",
    "forwarded",
];

/// Whether a node's `Set-Cookie` value sets one of the console's cookies: never passed
/// on, a node must not be able to plant or clear a console session on the edge's origin.
pub(crate) fn sets_console_cookie(value: &[u8]) -> bool {
    let name = value
        .split(|&b| b == b'=')
        .next()
        .unwrap_or_default()
        .trim_ascii();
    [crate::console::SESSION_COOKIE, crate::console::CSRF_COOKIE]
        .iter()
        .any(|c| name.eq_ignore_ascii_case(c.as_bytes()))
}

/// `X-Forwarded-For` toward a node: the client's address (`peer`), after the chain a
/// trusted proxy (`console.trusted_proxies`) sent; anyone else's header is replaced.
/// Borrowed when nothing is appended (the lean front keeps `peer` per connection).
pub(crate) fn forwarded_for<'a>(
    trusted: bool,
    peer: &'a str,
    sent: Option<&str>,
) -> std::borrow::Cow<'a, str> {
    match sent.map(str::trim) {
        Some(chain) if trusted && !chain.is_empty() => format!("{chain}, {peer}").into(),
        _ => peer.into(),
    }
}

/// Header names a `Connection` header lists (RFC 9110 §7.6.1): they stay on their hop.
pub(crate) fn connection_options(values: &[&[u8]]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split(|&b| b == b','))
        .map(|t| String::from_utf8_lossy(t.trim_ascii()).to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect()
}

/// Number of calls in a JSON-RPC batch body (1 for a single call or bad JSON, which the
/// gateway then refuses).
pub fn batch_len(body: &[u8]) -> u32 {
    if body.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'[') {
        return 1;
    }
    serde_json::from_slice::<Vec<serde::de::IgnoredAny>>(body)
        .map(|v| v.len().clamp(1, u32::MAX as usize) as u32)
        .unwrap_or(1)
}

/// Console request bodies are small JSON objects.
const CONSOLE_MAX_BODY: usize = 16 * 1024;

/// Admin JSON from the live fleet state: never cached by intermediaries.
fn mesh_reply(body: serde_json::Value, source: &'static str) -> Reply {
    Reply::json(200, serde_json::to_vec(&body).unwrap_or_default()).with_headers(vec![
        ("X-Mesh-Source", source.to_string()),
        ("Cache-Control", "no-store".to_string()),
    ])
}

/// `10` rather than `10.0`; fractional rates keep their decimals.
fn format_rps(rps: f64) -> String {
    if rps.fract() == 0.0 {
        format!("{}", rps as u64)
    } else {
        format!("{rps}")
    }
}

/// `raw` (a request path) without its first `prefix` segments, still percent-encoded.
pub(crate) fn raw_tail(raw: &str, prefix: usize) -> &str {
    let mut rest = raw.trim_start_matches('/');
    for _ in 0..prefix {
        rest = match rest.find('/') {
            Some(i) => rest[i..].trim_start_matches('/'),
            None => "",
        };
    }
    rest
}

/// Keep a caller's well-formed `X-Request-Id` (for tracing across hops); otherwise mint one.
pub(crate) fn request_id(given: Option<&[u8]>) -> String {
    if let Some(g) = given {
        if !g.is_empty()
            && g.len() <= 64
            && g.iter()
                .all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(c))
        {
            return String::from_utf8_lossy(g).into_owned();
        }
    }
    // A random process prefix, then a per-thread block (the top 8 bits) and a per-thread
    // count: unique without a counter shared between worker threads on every request.
    static PREFIX: once_cell::sync::Lazy<u32> = once_cell::sync::Lazy::new(rand::random);
    static THREADS: AtomicU64 = AtomicU64::new(0);
    thread_local! {
        static NEXT: std::cell::Cell<u64> = std::cell::Cell::new(
            (THREADS.fetch_add(1, Ordering::Relaxed) & 0xff) << 40
        );
    }
    let n = NEXT.with(|next| {
        let n = next.get();
        next.set((n & !0xff_ffff_ffff) | ((n + 1) & 0xff_ffff_ffff));
        n
    });
    let mut id = String::with_capacity(20);
    push_hex(&mut id, u64::from(*PREFIX), 8);
    push_hex(&mut id, n, 12);
    id
}

/// `digits` lower-case hex digits of `v`, zero-padded.
fn push_hex(out: &mut String, v: u64, digits: u32) {
    for i in (0..digits).rev() {
        let nibble = ((v >> (i * 4)) & 0xf) as u8;
        out.push(char::from(b"0123456789abcdef"[usize::from(nibble)]));
    }
}

#[cfg(test)]
mod tests {
    use super::raw_tail;

    #[test]
    fn request_ids_are_twenty_hex_digits_and_distinct() {
        let a = super::request_id(None);
        let b = super::request_id(None);
        assert_eq!(a.len(), 20);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert_eq!(super::request_id(Some(b"abc-1")), "abc-1");
        assert_eq!(super::request_id(Some(b"bad id")).len(), 20);
    }

    #[test]
    fn raw_tail_skips_the_route_prefix_and_keeps_encoding() {
        assert_eq!(raw_tail("/v1/polygon/heimdall/a%20b/c", 3), "a%20b/c");
        assert_eq!(raw_tail("//v1//polygon/heimdall//x", 3), "x");
        assert_eq!(raw_tail("/v1/polygon/heimdall", 3), "");
        assert_eq!(raw_tail("/bench/plain/", 2), "");
    }
}
