//! One route's OpenAPI operation: its parameters, body, security, the plans, scopes and
//! rate category it needs, and every answer it can give (its own and its policy's).

use super::entry::RouteContract;
use crate::errors::Envelope;
use crate::routes::matcher::Seg;
use crate::routes::spec::{Credential, HttpMethod};
use crate::routes::Route;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// `/v1/x/{id}/{*rest}` → `/v1/x/{id}/{rest}` (OpenAPI has no multi-segment parameter;
/// the tail's description says it takes the rest of the path).
pub(super) fn openapi_path(route: &Route) -> String {
    let mut path = String::new();
    for seg in &route.segments {
        path.push('/');
        match seg {
            Seg::Lit(l) => path.push_str(l),
            Seg::Param(p) | Seg::Tail(p) => {
                path.push('{');
                path.push_str(p);
                path.push('}');
            }
        }
    }
    if path.is_empty() {
        path.push('/');
    }
    path
}

pub(super) fn operation(
    route: &Route,
    c: &RouteContract,
    method: HttpMethod,
    plans: &[String],
) -> Value {
    let mut op = Map::new();
    op.insert("summary".into(), json!(c.summary));
    op.insert("tags".into(), json!([route.surface]));
    let mut parameters = Vec::new();
    for seg in &route.segments {
        let (name, tail) = match seg {
            Seg::Param(p) => (p, false),
            Seg::Tail(p) => (p, true),
            Seg::Lit(_) => continue,
        };
        let schema = c
            .params
            .get(name)
            .cloned()
            .unwrap_or(json!({"type": "string"}));
        let mut p = json!({"name": name, "in": "path", "required": true, "schema": schema});
        if tail {
            p["description"] = json!("the rest of the path; may contain '/'");
        }
        parameters.push(p);
    }
    for (name, q) in &c.query {
        let mut p =
            json!({"name": name, "in": "query", "required": q.required, "schema": q.schema});
        if let Some(d) = &q.description {
            p["description"] = json!(d);
        }
        parameters.push(p);
    }
    if !parameters.is_empty() {
        op.insert("parameters".into(), json!(parameters));
    }
    let takes_body = matches!(
        method,
        HttpMethod::POST | HttpMethod::PUT | HttpMethod::PATCH
    );
    if let (true, Some(body)) = (takes_body, &c.body) {
        let kind = c.body_type.as_deref().unwrap_or("application/json");
        op.insert(
            "requestBody".into(),
            json!({"required": true, "content": {kind: {"schema": body}}}),
        );
    }
    op.insert("security".into(), security(route.credential, method));
    op.insert("responses".into(), responses(route, c, method, plans));
    if let Some(plan) = &route.min_plan_name {
        let admitted: Vec<&String> = plans.iter().skip_while(|p| *p != plan).collect();
        op.insert("x-plans".into(), json!(admitted));
    }
    if !route.scopes.is_empty() {
        op.insert("x-scopes".into(), json!(route.scopes));
    }
    if !route.features.is_empty() {
        op.insert("x-features".into(), json!(route.features));
    }
    if let Some(rate) = &route.rate {
        op.insert("x-rate-category".into(), json!(rate));
    }
    if route.websocket {
        op.insert("x-websocket".into(), json!(true));
    }
    if !route.enabled {
        op.insert("x-enabled".into(), json!(false));
    }
    Value::Object(op)
}

pub(super) fn operation_id(route: &Route, method: HttpMethod, several: bool) -> String {
    let base = route.name.replace('.', "_");
    if several {
        format!("{base}_{}", method.as_str().to_ascii_lowercase())
    } else {
        base
    }
}

fn security(credential: Credential, method: HttpMethod) -> Value {
    let key = [json!({"bearer": []}), json!({"xToken": []})];
    match credential {
        Credential::None => json!([]),
        Credential::ApiKey => json!(key),
        Credential::OptionalApiKey => json!([{}, key[0], key[1]]),
        Credential::Bearer => json!([{"bearer": []}]),
        Credential::Session if unsafe_method(method) => {
            json!([{"consoleSession": [], "csrfToken": []}])
        }
        Credential::Session => json!([{"consoleSession": []}]),
        // Loopback callers need no token.
        Credential::Admin => json!([{"adminToken": []}, {}]),
        Credential::AdminOrApiKey => json!([{"adminToken": []}, {}, key[0], key[1]]),
    }
}

/// The GET of a WebSocket route whose other methods are not GET: only an upgrade.
fn is_upgrade(route: &Route, method: HttpMethod) -> bool {
    route.websocket && method == HttpMethod::GET && !route.methods.contains(&HttpMethod::GET)
}

fn unsafe_method(m: HttpMethod) -> bool {
    !matches!(m, HttpMethod::GET | HttpMethod::HEAD | HttpMethod::OPTIONS)
}

/// What a key is refused with before any route looks at it (`auth::check_standing`).
const KEY_REFUSALS_401: [&str; 4] = [
    "unauthorized",
    "trial_expired",
    "subscription_expired",
    "key_expired",
];

/// Error codes the route's policy can answer with, by status: the same for every route
/// with that policy (`edge/guard.rs`, `edge/pipeline.rs`).
fn policy_errors(route: &Route, method: HttpMethod) -> BTreeMap<u16, Vec<String>> {
    let mut e: BTreeMap<u16, Vec<String>> = BTreeMap::new();
    let mut add = |status: u16, code: &str| e.entry(status).or_default().push(code.into());
    let stream = route.envelope == Envelope::Stream;
    match route.credential {
        Credential::ApiKey | Credential::OptionalApiKey | Credential::Bearer => {
            for code in KEY_REFUSALS_401 {
                add(401, code);
            }
            add(403, "key_restricted");
        }
        Credential::AdminOrApiKey => {
            for code in KEY_REFUSALS_401 {
                add(401, code);
            }
            add(403, "key_restricted");
            add(403, "admin endpoint loopback-only");
        }
        Credential::Session => {
            add(401, "unauthenticated");
            if unsafe_method(method) {
                add(403, "csrf_missing");
                add(403, "csrf_invalid");
            }
        }
        Credential::Admin => add(403, "admin endpoint loopback-only"),
        Credential::None => {}
    }
    if route.min_plan.is_some() || !route.scopes.is_empty() || !route.features.is_empty() {
        add(
            403,
            if stream {
                "tier_locked"
            } else {
                "tier_insufficient"
            },
        );
    }
    if route.envelope == Envelope::Console || route.surface == "console" {
        add(403, "origin_not_allowed");
    }
    if route.rate.is_some() {
        add(429, "rate_limited");
    }
    // A key or session the store must be asked about, or a console call, while the store
    // cannot be reached (with Retry-After).
    let reads_store = !matches!(route.credential, Credential::None | Credential::Admin);
    if reads_store || route.surface == "console" {
        add(503, "store_unavailable");
    }
    if is_upgrade(route, method) {
        add(426, "upgrade_required");
    }
    if unsafe_method(method) {
        add(413, "payload_too_large");
    }
    if !route.param_names.is_empty() {
        add(400, "invalid_path");
    }
    if route.switch.is_some() || !route.enabled {
        add(503, "route_disabled");
    }
    add(
        405,
        if route.envelope == Envelope::Admin {
            "only GET supported"
        } else {
            "method_not_allowed"
        },
    );
    e
}

fn responses(route: &Route, c: &RouteContract, method: HttpMethod, _plans: &[String]) -> Value {
    let mut out = Map::new();
    let ok = c.status.unwrap_or(200);
    let kind = c.response_type.as_deref().unwrap_or("application/json");
    let mut success = json!({"description": c.summary.clone()});
    if method != HttpMethod::HEAD {
        if let Some(schema) = &c.response {
            let mut content = Map::new();
            content.insert(kind.into(), json!({"schema": schema}));
            for (other, schema) in &c.also {
                content.insert(other.clone(), json!({"schema": schema}));
            }
            success["content"] = Value::Object(content);
        }
    }
    if is_upgrade(route, method) {
        out.insert(
            "101".into(),
            json!({"description": "WebSocket upgrade accepted"}),
        );
    } else {
        for other in &c.also_status {
            out.insert(other.to_string(), success.clone());
        }
        out.insert(ok.to_string(), success);
    }
    let mut errors = policy_errors(route, method);
    for (status, codes) in &c.errors {
        let have = errors.entry(*status).or_default();
        for code in codes {
            if !have.contains(code) {
                have.push(code.clone());
            }
        }
    }
    for (status, mut codes) in errors {
        codes.sort();
        codes.dedup();
        let mut schema = error_schema(route.envelope, &codes);
        if c.passthrough {
            schema = json!({"anyOf": [schema, {"$ref": "#/components/schemas/AnyJson"}]});
        }
        let body = if method == HttpMethod::HEAD {
            json!({"description": codes.join(", ")})
        } else {
            json!({"description": codes.join(", "), "content": {"application/json": {"schema": schema}}})
        };
        out.insert(status.to_string(), body);
    }
    if c.passthrough && method != HttpMethod::HEAD {
        out.insert(
            "default".into(),
            json!({"description": "the node's own answer, with its own status, passed through",
                   "content": {"*/*": {"schema": {"$ref": "#/components/schemas/AnyJson"}}}}),
        );
    }
    Value::Object(out)
}

/// The surface's envelope with `error` limited to the codes listed (admin errors are
/// messages; JSON-RPC refusals carry the code in `error.data.error`).
fn error_schema(envelope: Envelope, codes: &[String]) -> Value {
    let name = envelope_name(envelope);
    let reference = json!({"$ref": format!("#/components/schemas/{name}")});
    let codes = json!({"type": "string", "enum": codes});
    match envelope {
        // Admin errors are messages, not codes.
        Envelope::Admin => reference,
        Envelope::JsonRpc => {
            json!({"allOf": [reference, {"properties": {"error": {"properties": {"data": {"properties": {"error": codes}}}}}}]})
        }
        _ => json!({"allOf": [reference, {"properties": {"error": codes}}]}),
    }
}

fn envelope_name(envelope: Envelope) -> &'static str {
    match envelope {
        Envelope::ChainRest => "ChainRestError",
        Envelope::Console => "ConsoleError",
        Envelope::Admin => "AdminError",
        Envelope::Stream => "StreamError",
        Envelope::JsonRpc => "JsonRpcErrorResponse",
    }
}
