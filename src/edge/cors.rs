//! Cross-origin policy per route: public (any origin, no cookies), console (one origin,
//! with credentials) or none.

use crate::routes::spec::CorsPolicy;
use crate::routes::Route;

pub const PUBLIC_ALLOW_HEADERS: &str =
    "Authorization, x-token, Content-Type, Accept, X-Request-Id, X-Chainedge-Min-Block";
pub const CONSOLE_ALLOW_HEADERS: &str = "Content-Type, Accept, X-CSRF-Token, X-Request-Id";
pub const EXPOSE_HEADERS: &str =
    "X-Request-Id, Retry-After, X-RateLimit-Limit, X-RateLimit-Remaining, \
     X-RateLimit-Reset, X-Required-Tier, X-Chainedge-Block, X-Cache-Status, X-Cache-Reason";

/// The CORS verdict for one request's `Origin`.
pub enum Verdict {
    /// No `Origin` header, or a policy that adds nothing: no CORS headers.
    NotCors,
    /// Allowed: these headers go on the response.
    Allow(Vec<(&'static str, String)>),
    /// The origin is not admitted for this route.
    Deny,
}

/// `same_origin`: the `Origin` is the gateway's own (the console page it serves at
/// `/console/`); browsers never let another site claim it.
pub fn check(
    route: &Route,
    origin: Option<&str>,
    console_origin: Option<&str>,
    same_origin: bool,
) -> Verdict {
    let Some(origin) = origin else {
        return Verdict::NotCors;
    };
    if same_origin && route.cors == CorsPolicy::Console {
        return Verdict::NotCors;
    }
    match route.cors {
        CorsPolicy::Public => Verdict::Allow(vec![
            ("Access-Control-Allow-Origin", "*".into()),
            ("Access-Control-Expose-Headers", EXPOSE_HEADERS.into()),
        ]),
        CorsPolicy::Console => match console_origin {
            Some(allowed) if allowed == origin => Verdict::Allow(vec![
                ("Access-Control-Allow-Origin", origin.to_string()),
                ("Access-Control-Allow-Credentials", "true".into()),
                ("Access-Control-Expose-Headers", EXPOSE_HEADERS.into()),
                ("Vary", "Origin".into()),
            ]),
            _ => Verdict::Deny,
        },
        CorsPolicy::None => Verdict::Deny,
    }
}

/// Extra headers of a successful preflight.
pub fn preflight_headers(route: &Route) -> Vec<(&'static str, String)> {
    let allow_headers = match route.cors {
        CorsPolicy::Console => CONSOLE_ALLOW_HEADERS,
        _ => PUBLIC_ALLOW_HEADERS,
    };
    vec![
        ("Access-Control-Allow-Methods", route.allow.clone()),
        ("Access-Control-Allow-Headers", allow_headers.into()),
        ("Access-Control-Max-Age", "600".into()),
    ]
}
