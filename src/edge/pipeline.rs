//! The request path, top to bottom: classify (route, 404/405/426), CORS, switches, the
//! guard (authenticate, authorize, limit), then dispatch.

use super::{cors, Ctx, Downstream, Edge, Outcome, PreMatch};
use crate::auth::Principal;
use crate::errors::{ApiError, Envelope};
use crate::reply::Reply;
use crate::routes::matcher::{Match, NormalizedPath};
use crate::routes::spec::HandlerKind;
use crate::routes::Route;
use crate::rpc::compute_units::Cost;
use std::sync::Arc;

/// Headers by which a proxy says it is one.
const FORWARDING_HEADERS: [&str; 4] = ["x-forwarded-for", "forwarded", "x-real-ip", "via"];

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
        // Behind a trusted proxy (a load balancer), the client its `X-Forwarded-For`
        // names (every line of it, one list): limited, logged and judged for admin as
        // such.
        let peer = session.client_ip();
        let trusted = st.console().trusts(peer);
        if trusted {
            let chain = session.header_list("x-forwarded-for");
            ctx.forwarded_client = st.console().client(peer, chain.as_deref());
        }

        let method = session.method().to_string();
        let pre = session.take_match();
        let origin = session.header("origin").map(str::to_string);

        // CORS preflight: answered from the policy of the route the real request would hit.
        if method == "OPTIONS" {
            if let Some(reply) = self.preflight(session, ctx, origin.as_deref())? {
                return Ok(Outcome::Reply(reply));
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
        let admin_here = self.open_to(session, ctx, &route, origin.as_deref())?;

        // A channel's path rule (the beacon API's groups: traversal refused, the group's
        // plan and rate) is checked before anything else is done.
        if let Some(rule) = route.channel.and_then(|c| c.path_rule) {
            ctx.path_rule = Some(rule(session.path())?);
        }

        self.guard(session, ctx, &route, admin_here, trusted, &method)
            .await?;
        self.dispatch(session, ctx, &route).await
    }

    /// A CORS preflight (`OPTIONS` with an `Origin` and the method wanted): answered from
    /// the policy of the route the real request would hit. `None`: not a preflight.
    fn preflight<D: Downstream + ?Sized>(
        &self,
        session: &mut D,
        ctx: &mut Ctx,
        origin: Option<&str>,
    ) -> Result<Option<Reply>, ApiError> {
        let (Some(origin), Some(wanted)) =
            (origin, session.header("access-control-request-method"))
        else {
            return Ok(None);
        };
        let wanted = wanted.to_string();
        let path = NormalizedPath::parse(session.path());
        let route = self.classify(ctx, &wanted, &path, false)?;
        let same = self.same_origin(session, origin);
        match cors::check(&route, Some(origin), self.console_origin(), same) {
            cors::Verdict::Allow(mut h) => {
                h.extend(cors::preflight_headers(&route));
                let h = h.into_iter().map(|(k, v)| (k, v.into())).collect();
                Ok(Some(Reply::empty(204).with_headers(h)))
            }
            _ => Err(ApiError::new(
                403,
                "origin_not_allowed",
                format!("origin {origin} may not call this route"),
            )),
        }
    }

    /// Whether the route is open to this request: CORS, the admin listener, the route's
    /// switches. Returns whether the request came in on the admin listener.
    fn open_to<D: Downstream + ?Sized>(
        &self,
        session: &D,
        ctx: &mut Ctx,
        route: &Route,
        origin: Option<&str>,
    ) -> Result<bool, ApiError> {
        let st = &*self.state;
        let same = origin.is_some_and(|o| self.same_origin(session, o));
        match cors::check(route, origin, self.console_origin(), same) {
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
        // With an admin listener of its own, admin lives there and nowhere else: admin
        // routes are not found elsewhere, routes admins cannot call are not found there,
        // and on the data plane nobody is admin (per-host RPC takes its API keys only).
        let mut admin_here = true;
        if let Some(admin) = st.config.admin_listen {
            admin_here = session
                .local_addr()
                .is_some_and(|l| l.port() == admin.port());
            let admin_only = route.credential == crate::routes::spec::Credential::Admin;
            if (admin_here && !route.credential.admits_admin()) || (!admin_here && admin_only) {
                return Err(ApiError::route_not_found());
            }
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

        Ok(admin_here)
    }

    /// Authenticate, authorize and limit: the principal recorded in `ctx` (a refusal
    /// still counts in the key's usage), the session refreshed, the route's rate
    /// category counted unless JSON-RPC counts per call.
    async fn guard<D: Downstream + ?Sized>(
        &self,
        session: &mut D,
        ctx: &mut Ctx,
        route: &Arc<Route>,
        admin_here: bool,
        trusted: bool,
        method: &str,
    ) -> Result<(), ApiError> {
        let st = &*self.state;
        let peer = session.client_ip();
        // Only routes an admin may call ask where the request came from (the header
        // lookups stay off the other routes' path).
        let admin_origin = route
            .credential
            .admits_admin()
            .then(|| crate::auth::Origin {
                admin_here,
                client: ctx.client(peer),
                proxied_unknown: !trusted
                    && peer.is_some_and(crate::auth::is_loopback)
                    && FORWARDING_HEADERS
                        .iter()
                        .any(|h| session.header(h).is_some()),
            });
        let principal = self.authenticate(session, route, admin_origin).await?;
        // The principal is recorded first so a refusal still counts in the key's usage;
        // then borrowed from there (a key's reference count is every thread's to write).
        ctx.principal = Some(principal);
        let principal = ctx.principal.as_ref().unwrap_or(&Principal::Anonymous);
        if let Principal::Key(rec) = principal {
            if let Some(r) = &rec.restrictions {
                r.request(
                    session.header("origin"),
                    ctx.client(peer),
                    crate::key_restrictions::chain_of_route(&route.name),
                )?;
            }
        }
        let mut category = route.rate.as_deref();
        if let Some(rule) = &ctx.path_rule {
            if let Principal::Key(rec) = principal {
                self.require_plan(rec, rule.min_plan)?;
            }
            category = Some(rule.rate);
        }
        if let Principal::User(s) = principal {
            // SPEC order: session first (401), then the double-submit CSRF check (403).
            crate::console::check_csrf(method, s.csrf.as_deref(), session.header("x-csrf-token"))?;
            let cookies = session.cookies();
            let token = crate::console::cookie(cookies.as_deref(), crate::console::SESSION_COOKIE);
            ctx.cookies = st.console().refresh(s, self.secure(session), token).await;
        }
        // The limit stage (`Edge::limit`): here for a route priced per request; a
        // JSON-RPC body is priced by its calls when it enters the gateway
        // (`rpc::Gateway::enter`, after the batch cap), and a WebSocket upgrade counts
        // once, then each message counts its calls.
        let per_call = matches!(route.handler, HandlerKind::JsonRpc | HandlerKind::HostRpc);
        if let Some(category) = category.filter(|_| !per_call) {
            let cost = Cost::request(st.compute_units.route(&route.name));
            let client = ctx.client(session.client_ip());
            ctx.rate_headers = self.limit(client, principal, category, cost)?;
        }
        Ok(())
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
                    // A switched-off channel is off for its GET, upgrade or not; a method
                    // it never takes stays 405.
                    if let Some(off) = routes.iter().find(|r| r.websocket && !r.enabled) {
                        return Err(ApiError::new(
                            503,
                            "route_disabled",
                            format!("{} is switched off", off.name),
                        ));
                    }
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
            Match::NotFound => {
                if let Some(envelope) = self.state.matcher.envelope_near(path) {
                    ctx.envelope = envelope;
                }
                Err(ApiError::route_not_found())
            }
        }
    }

    /// Whether cookies set on this response get `Secure`.
    pub(super) fn secure<D: Downstream + ?Sized>(&self, session: &D) -> bool {
        self.state.console().secure(
            session.is_tls(),
            session.client_ip(),
            session.header("x-forwarded-proto"),
        )
    }

    /// Whether `origin` is this gateway itself (scheme of the connection + `Host`).
    pub(super) fn same_origin<D: Downstream + ?Sized>(&self, session: &D, origin: &str) -> bool {
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

    pub(super) fn console_origin(&self) -> Option<&str> {
        self.state.config.app.console.origin.as_deref()
    }
}
