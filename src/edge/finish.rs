//! The finish step: what is recorded of every finished request, in one place, as
//! Pingora's `logging` phase would: its metrics and its key's usage (HTTP requests;
//! a WebSocket message's calls are counted as they are answered), then its access-log
//! line and its key's request log (an HTTP request and each WebSocket message alike).

use super::{Ctx, Edge};
use crate::auth::Principal;
use crate::observe::{access_log, metrics};
use crate::routes::Route;

/// What the logs are told of one finished request (an HTTP request, or one message of a
/// WebSocket session).
pub(super) struct Finished<'a> {
    pub request_id: &'a str,
    pub client: &'a str,
    pub method: &'a str,
    pub path: &'a str,
    pub route: Option<&'a Route>,
    pub principal: Option<&'a Principal>,
    pub status: u16,
    pub latency_us: u64,
    pub upstream: Option<&'a str>,
    pub error: Option<&'a str>,
    /// How the answer was checked (`X-Chainedge-Verified`).
    pub verified: Option<&'static str>,
    /// What the key's request log names it by (a JSON-RPC call's method); `None`: not
    /// in the request log.
    pub logged_as: Option<&'a str>,
}

impl Edge {
    /// Metrics, usage and the logs of a finished HTTP request (`status` 0: no answer
    /// sent). Both servers call it once per request.
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
        self.count_request(ctx, status);
        // Behind a trusted proxy the log names the client, not the proxy.
        let forwarded = ctx.forwarded_client.map(|ip| ip.to_string());
        self.log_finished(&Finished {
            request_id: &ctx.request_id,
            client: forwarded.as_deref().unwrap_or(client),
            method,
            path,
            route: ctx.route.as_deref(),
            principal: ctx.principal.as_ref(),
            status,
            latency_us: (elapsed * 1e6).round() as u64,
            upstream: ctx.upstream.as_deref(),
            error: ctx.error_code.or(error),
            verified: ctx.verified,
            logged_as: Some(ctx.rpc_method.as_deref().unwrap_or(method)),
        });
    }

    /// The access-log line of a finished request, and its line in its key's request log.
    pub(super) fn log_finished(&self, f: &Finished<'_>) {
        let key = match f.principal {
            Some(Principal::Key(k)) => Some(k),
            _ => None,
        };
        let route = f.route.map_or("", |r| r.name.as_str());
        access_log::with_timestamp(|ts| {
            access_log::write(&access_log::AccessLine {
                ts,
                request_id: f.request_id,
                client: f.client,
                method: f.method,
                path: f.path,
                route,
                surface: f.route.map_or("", |r| r.surface.as_str()),
                tenant: key.map(|k| k.tenant_id.as_str()),
                key_id: key.map(|k| k.key_id.as_str()),
                user: match f.principal {
                    Some(Principal::Key(k)) => k.user_id.as_deref(),
                    Some(Principal::User(s)) => Some(s.user_id.as_str()),
                    _ => None,
                },
                status: f.status,
                latency_us: f.latency_us,
                upstream: f.upstream,
                error: f.error,
                verified: f.verified,
            })
        });
        if let (Some(key), Some(method)) = (key, f.logged_as) {
            self.log_key_request(key, route, method, f);
        }
    }

    /// A finished request (or WebSocket message) in its key's request log, when the log
    /// is on: what a developer debugging it needs, never a body or a secret.
    fn log_key_request(
        &self,
        key: &crate::store::KeyRecord,
        route: &str,
        method: &str,
        f: &Finished<'_>,
    ) {
        let st = &*self.state;
        if !st.requests().enabled() || !st.config.app.usage.enabled {
            return;
        }
        st.requests().add(&crate::usage::requests::Finished {
            key_id: &key.key_id,
            tenant_id: &key.tenant_id,
            at_us: crate::clock::now_us(),
            route,
            method,
            status: f.status,
            error: f.error,
            latency_us: f.latency_us,
            upstream: f.upstream,
        });
    }
}
