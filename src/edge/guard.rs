//! The guard: who the caller is (admin, API key, console session, anonymous), whether
//! their plan, scopes and features allow the route, and the rate limit.

use super::{Ctx, Downstream, Edge};
use crate::auth::plans::{Grants, Plans, Requirement};
use crate::auth::{self, Principal};
use crate::errors::{ApiError, Envelope};
use crate::limits::{Caller, Decision};
use crate::routes::spec::Credential;
use crate::routes::Route;
use crate::rpc::compute_units::Cost;
use crate::store::KeyRecord;
use crate::usage::Tally;
use std::net::IpAddr;
use std::sync::Arc;

impl Edge {
    pub(super) async fn authenticate<D: Downstream + ?Sized>(
        &self,
        session: &D,
        route: &Route,
        origin: Option<auth::Origin>,
    ) -> Result<Principal, ApiError> {
        let st = &*self.state;
        // `origin` is known on every route an admin may call (`admits_admin`).
        let origin = origin.unwrap_or(auth::Origin {
            admin_here: false,
            client: None,
            proxied_unknown: true,
        });
        let admin = || {
            auth::admin(
                origin,
                session.header("x-admin-token").map(str::as_bytes),
                st.config.admin_token.as_ref(),
                st.config.app.admin.allow_loopback,
            )
        };
        match route.credential {
            Credential::Admin => admin().map_err(|(why, e)| {
                let reason = match why {
                    auth::AdminRefusal::WrongToken => "wrong_token",
                    auth::AdminRefusal::NoToken => "no_token",
                };
                crate::observe::metrics::ADMIN_REFUSED
                    .with_label_values(&[reason])
                    .inc();
                if why == auth::AdminRefusal::WrongToken {
                    log::warn!(
                        "admin: wrong X-Admin-Token from {} on {}",
                        origin.client.map_or("-".into(), |c| c.to_string()),
                        route.name
                    );
                }
                e
            }),
            Credential::None => Ok(Principal::Anonymous),
            Credential::Session => {
                let cookies = session.cookies();
                let s = st
                    .console()
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
                    .keys()
                    .resolve(secret)
                    .await?
                    .ok_or_else(|| ApiError::new(401, "unauthorized", "unknown API key"))?;
                auth::check_standing(&rec, crate::clock::now())?;
                self.authorize(route, &rec)?;
                Ok(Principal::Key(rec))
            }
        }
    }

    /// The configured plans and where to upgrade (`auth::plans` holds the rules).
    pub(super) fn plans(&self) -> Plans<'_> {
        Plans {
            order: &self.state.config.app.plans,
            upgrade_url: &self.state.config.app.upgrade_url,
        }
    }

    /// A plan's rank in the configured order (lowest first); `None` for an unknown plan.
    pub(super) fn plan_rank(&self, plan: &str) -> Option<usize> {
        self.plans().rank(plan)
    }

    /// Plan ("X and above"), scopes and features of the route against the key's tenant.
    pub(super) fn authorize(&self, route: &Route, rec: &KeyRecord) -> Result<(), ApiError> {
        let has = Grants {
            plan: &rec.plan,
            scopes: &rec.scopes,
            features: &rec.features,
        };
        let needs = Requirement {
            min_plan: route.min_plan_name.as_deref(),
            scopes: &route.scopes,
            features: &route.features,
            stream: route.envelope == Envelope::Stream,
        };
        self.plans().admit(&has, &needs)
    }

    /// The limit stage, the one for every way in (a route's request, a JSON-RPC body,
    /// a WebSocket upgrade and each of its messages): count the calls of `cost` in
    /// `category`, then its compute units, against the caller's plan. The
    /// `X-RateLimit-*` (and `X-ComputeUnits-*`) headers when admitted, the 429
    /// otherwise; a request refused on units gives its calls back. Admins and console
    /// users are not limited.
    pub(super) fn limit(
        &self,
        client_ip: Option<IpAddr>,
        principal: &Principal,
        category: &str,
        cost: Cost,
    ) -> Result<RateHeaders, ApiError> {
        let (caller, tier) = match principal {
            Principal::Admin | Principal::User(_) => return Ok(RateHeaders::default()),
            Principal::Key(rec) => (
                Caller::Tenant {
                    id: &rec.tenant_id,
                    rank: self.plan_rank(&rec.plan).unwrap_or(0),
                },
                rec.plan.as_str(),
            ),
            Principal::Anonymous => (
                Caller::Address(client_ip.unwrap_or(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST))),
                crate::config::limits::ANONYMOUS,
            ),
        };
        let limiter = &self.state.limiter;
        // The key's own cap first (`max_rps`, under its tenant's plan); what a later
        // check refuses gives it back.
        let key_cap = self.check_key_cap(principal, tier, cost.calls)?;
        let give_back_cap = || {
            if let Some((id, _, _)) = &key_cap {
                limiter.refund(&Caller::Key(id), crate::limits::KEY_CAP, cost.calls);
            }
        };
        let d = limiter.check_weighted(&caller, category, cost.calls);
        if !d.admitted {
            give_back_cap();
            let limit = format_rps(d.limit_rps);
            return Err(rate_limited(
                format!("over {limit} requests/s for {category} on plan {tier}"),
                &d,
                tier,
                category,
            )
            .with_field("limit_rps", d.limit_rps)
            .with_header("X-RateLimit-Limit", limit));
        }
        // The lower of the two limits is the one the headers show.
        let mut headers = RateHeaders {
            calls: Some(match &key_cap {
                Some((_, rps, k)) if *rps < d.limit_rps => (*rps, k.remaining.min(d.remaining)),
                _ => (d.limit_rps, d.remaining),
            }),
            units: None,
        };
        if let Some(u) = limiter.check_compute_units(&caller, cost.compute_units) {
            if !u.admitted {
                let units = format_rps(u.limit_rps);
                limiter.refund(&caller, category, cost.calls);
                give_back_cap();
                return Err(rate_limited(
                    format!(
                        "over {units} compute units/s on plan {tier} (this request costs {})",
                        cost.compute_units
                    ),
                    &u,
                    tier,
                    crate::limits::COMPUTE_UNITS,
                )
                .with_field("limit_cu_per_sec", u.limit_rps)
                .with_field("compute_units", cost.compute_units)
                .with_header("X-ComputeUnits-Limit", units));
            }
            headers.units = Some((u.limit_rps, u.remaining));
        }
        Ok(headers)
    }

    /// The cap a key's owner set on it (`max_rps`): `None` when there is none, the key's
    /// id, the cap and the decision when it admitted `calls`, the 429 naming the
    /// restriction when not.
    fn check_key_cap<'p>(
        &self,
        principal: &'p Principal,
        tier: &str,
        calls: u32,
    ) -> Result<Option<(&'p str, f64, Decision)>, ApiError> {
        let Principal::Key(rec) = principal else {
            return Ok(None);
        };
        let Some(rps) = rec.restrictions.as_ref().and_then(|r| r.max_rps) else {
            return Ok(None);
        };
        let k = self.state.limiter.check_key_cap(&rec.key_id, rps, calls);
        if !k.admitted {
            let cap = format_rps(rps);
            return Err(rate_limited(
                format!("over {cap} requests/s, the cap set on this key"),
                &k,
                tier,
                crate::limits::KEY_CAP,
            )
            .with_field("limit_rps", rps)
            .with_field("restriction", "max_rps")
            .with_header("X-RateLimit-Limit", cap));
        }
        Ok(Some((rec.key_id.as_str(), rps, k)))
    }

    /// Add a request's (or WebSocket message's) part to its key's usage; other callers
    /// have no usage of their own.
    pub(super) fn count_usage(&self, principal: &Principal, tally: Tally) {
        if let Principal::Key(rec) = principal {
            if self.state.config.app.usage.enabled {
                self.state.usage().record(rec, tally);
            }
        }
    }

    /// A finished request in its key's usage: a JSON-RPC body's calls and units (or the
    /// route's cost), by the status it was answered with.
    pub(super) fn count_request(&self, ctx: &Ctx, status: u16) {
        let Some(principal @ Principal::Key(_)) = &ctx.principal else {
            return;
        };
        let cost = ctx.usage.unwrap_or_else(|| Cost {
            calls: 1,
            compute_units: ctx
                .route
                .as_ref()
                .map_or(0, |r| self.state.compute_units.route(&r.name) as u64),
        });
        // Status 0: the client left before an answer; the calls count, nothing else.
        let tally = match status {
            0 => Tally {
                calls: cost.calls,
                ..Tally::default()
            },
            _ => Tally::of(cost.calls, cost.compute_units, status, ctx.error_answers),
        };
        self.count_usage(principal, tally);
    }

    pub(super) fn tier_insufficient(
        &self,
        current: &str,
        required: &str,
        message: String,
    ) -> ApiError {
        self.plans().needs_plan(current, required, message)
    }

    /// "X and above" against the key's plan, for checks finer than the route's own tier.
    pub(super) fn require_plan(&self, rec: &KeyRecord, required: &str) -> Result<(), ApiError> {
        self.plans().require(&rec.plan, required)
    }
}

/// The 429 of a refused check; the caller adds the limit's own field and header.
fn rate_limited(message: String, d: &Decision, tier: &str, category: &str) -> ApiError {
    ApiError::new(429, "rate_limited", message)
        .with_field("retry_after_sec", d.retry_after_sec)
        .with_field("current_tier", tier)
        .with_field("category", category)
        .with_header("Retry-After", d.retry_after_sec.to_string())
        .with_header("X-RateLimit-Remaining", "0")
        .with_header("X-RateLimit-Reset", d.retry_after_sec.to_string())
}

/// `10` rather than `10.0`; fractional rates keep their decimals.
/// The `X-RateLimit-*` and `X-ComputeUnits-*` values of an admitted request, kept as
/// numbers and written as text only into the answer's head: formatted here, they were
/// three allocations on every keyed request.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct RateHeaders {
    /// Calls per second and calls left now (the lower of the plan's and the key's cap).
    pub(crate) calls: Option<(f64, u64)>,
    /// Compute units per second and units left now, when the plan limits them.
    pub(crate) units: Option<(f64, u64)>,
}

impl RateHeaders {
    /// Whether a node's header `name` is one of these (ours replace it).
    pub(crate) fn names(&self, name: &str) -> bool {
        let calls = self.calls.is_some()
            && (name.eq_ignore_ascii_case("x-ratelimit-limit")
                || name.eq_ignore_ascii_case("x-ratelimit-remaining"));
        let units = self.units.is_some()
            && (name.eq_ignore_ascii_case("x-computeunits-limit")
                || name.eq_ignore_ascii_case("x-computeunits-remaining"));
        calls || units
    }

    /// Each header as name and text, the numbers written on the stack.
    pub(crate) fn each<E>(
        &self,
        mut f: impl FnMut(&'static str, &str) -> Result<(), E>,
    ) -> Result<(), E> {
        let pairs = [
            (self.calls, "X-RateLimit-Limit", "X-RateLimit-Remaining"),
            (
                self.units,
                "X-ComputeUnits-Limit",
                "X-ComputeUnits-Remaining",
            ),
        ];
        for (value, limit_name, remaining_name) in pairs {
            let Some((limit, remaining)) = value else {
                continue;
            };
            let mut whole = itoa::Buffer::new();
            let limit_text = match whole_rps(limit) {
                Some(n) => std::borrow::Cow::Borrowed(whole.format(n)),
                None => std::borrow::Cow::Owned(format!("{limit}")),
            };
            f(limit_name, &limit_text)?;
            f(remaining_name, itoa::Buffer::new().format(remaining))?;
        }
        Ok(())
    }
}

/// A limit that is a whole number, as one (`5000`, not `5000.0`).
fn whole_rps(rps: f64) -> Option<u64> {
    (rps.fract() == 0.0).then_some(rps as u64)
}

fn format_rps(rps: f64) -> String {
    if let Some(n) = whole_rps(rps) {
        n.to_string()
    } else {
        format!("{rps}")
    }
}

#[cfg(test)]
mod tests {
    use super::RateHeaders;

    fn written(h: &RateHeaders) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        let Ok(()) = h.each(|k, v| {
            out.push((k, v.to_string()));
            Ok::<(), std::convert::Infallible>(())
        });
        out
    }

    #[test]
    fn rate_headers_are_written_as_the_limit_stage_formatted_them() {
        assert!(written(&RateHeaders::default()).is_empty());
        let h = RateHeaders {
            calls: Some((5000.0, 4998)),
            units: Some((0.5, 0)),
        };
        let expected = [
            ("X-RateLimit-Limit", "5000"),
            ("X-RateLimit-Remaining", "4998"),
            ("X-ComputeUnits-Limit", "0.5"),
            ("X-ComputeUnits-Remaining", "0"),
        ];
        let got = written(&h);
        assert_eq!(got.len(), expected.len());
        for ((k, v), (ek, ev)) in got.iter().zip(expected) {
            assert_eq!((*k, v.as_str()), (ek, ev));
            assert!(h.names(&k.to_ascii_lowercase()), "{k} is one of ours");
        }
        let calls_only = RateHeaders {
            calls: Some((2.25, 1)),
            units: None,
        };
        assert_eq!(written(&calls_only)[0].1, super::format_rps(2.25));
        assert!(!calls_only.names("X-ComputeUnits-Limit"));
        assert!(!calls_only.names("x-ratelimit-reset"));
    }
}
