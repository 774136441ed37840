//! The API contract as data: OpenAPI 3.1 built from the route table (`plugins/*.yaml`:
//! paths, methods, credentials, tiers, rate categories, envelopes) and each route's
//! schemas (`plugins/contract/<surface>.yaml`: parameters, bodies, the answer, the errors
//! only its handler gives). What every route of a kind can answer (401, 403, 405, 413,
//! 429, …) is derived here from its policy, in its surface's envelope, so the document
//! cannot drift from what the edge enforces. Served at `GET /openapi.json`, written to
//! `docs/openapi.json` by `chainedge openapi`.

use crate::config::ConfigError;
use crate::errors::Envelope;
use crate::routes::matcher::{Matcher, Seg};
use crate::routes::spec::{Credential, HttpMethod};
use crate::routes::Route;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// One surface's contract file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ContractFile {
    /// Shared schemas (`components.schemas`), referenced as `#/components/schemas/<Name>`.
    #[serde(default)]
    schemas: BTreeMap<String, Value>,
    /// Per route name.
    #[serde(default)]
    routes: BTreeMap<String, RouteContract>,
}

/// What a route takes and answers beyond what its policy says.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteContract {
    pub summary: String,
    /// Path parameters' schemas, by name (a tail parameter takes the rest of the path).
    #[serde(default)]
    params: BTreeMap<String, Value>,
    /// Query parameters.
    #[serde(default)]
    query: BTreeMap<String, QueryParam>,
    /// The request body's schema (`body_type`, default JSON), when the route takes one.
    #[serde(default)]
    body: Option<Value>,
    #[serde(default)]
    body_type: Option<String>,
    /// The success status (default 200) and its body (`response_type`, default JSON).
    #[serde(default)]
    status: Option<u16>,
    /// Other success statuses with the same body (a request applied at once, 200, or
    /// accepted for later, 202).
    #[serde(default)]
    also_status: Vec<u16>,
    #[serde(default)]
    response: Option<Value>,
    #[serde(default)]
    response_type: Option<String>,
    /// The same answer in other content types, by type (`text/csv` of an export).
    #[serde(default)]
    also: BTreeMap<String, Value>,
    /// Error codes by status that this route's handler gives, beyond its policy's.
    #[serde(default)]
    errors: BTreeMap<u16, Vec<String>>,
    /// A proxy route: the node's own answers pass through with the node's status, so
    /// any status may carry the node's body instead of the edge's envelope.
    #[serde(default)]
    passthrough: bool,
    /// What the route answers `tests/routes.rs`'s probe (a gateway with one anvil pool and
    /// a top-plan key with every scope), stated beside the route rather than in the test.
    #[serde(default, rename = "probe")]
    _probe: Option<serde::de::IgnoredAny>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct QueryParam {
    schema: Value,
    #[serde(default)]
    required: bool,
    #[serde(default)]
    description: Option<String>,
}

/// Every surface's contract.
#[derive(Debug, Default)]
pub struct Contract {
    schemas: BTreeMap<String, Value>,
    routes: BTreeMap<String, RouteContract>,
}

impl Contract {
    /// Read `dir/*.yaml`; a parameter the route's path lacks is an error. A missing
    /// directory is an empty contract.
    pub fn load(dir: &Path, matcher: &Matcher) -> Result<Contract, Vec<ConfigError>> {
        let mut contract = Contract::default();
        let mut errors = Vec::new();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Ok(contract);
        };
        let mut files: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
            .collect();
        files.sort();
        for file in files {
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) => {
                    errors.push(ConfigError::new(&file, "", format!("cannot read: {e}")));
                    continue;
                }
            };
            let part: ContractFile = match crate::config::parse_yaml(&text) {
                Ok(p) => p,
                Err((key, reason)) => {
                    errors.push(ConfigError::new(&file, &key, reason));
                    continue;
                }
            };
            for (name, schema) in part.schemas {
                if contract.schemas.insert(name.clone(), schema).is_some() {
                    let at = format!("schemas.{name}");
                    errors.push(ConfigError::new(&file, &at, "defined twice".into()));
                }
            }
            for (name, route) in part.routes {
                let at = format!("routes.{name}");
                // A route this configuration leaves out (edge-only routes on an origin
                // gateway) keeps its contract; `openapi --strict` catches a misspelt name
                // by the route it leaves uncovered.
                if let Some(r) = matcher.routes().iter().find(|r| r.name == name) {
                    for p in route.params.keys() {
                        if !r.param_names.contains(p) {
                            let reason = format!("the path {} has no parameter {p}", r.path);
                            errors.push(ConfigError::new(&file, &at, reason));
                        }
                    }
                }
                if contract.routes.insert(name, route).is_some() {
                    errors.push(ConfigError::new(&file, &at, "defined twice".into()));
                }
            }
        }
        if errors.is_empty() {
            Ok(contract)
        } else {
            Err(errors)
        }
    }

    /// Routes of the table without a contract (the check CI runs on `plugins/`).
    pub fn uncovered<'m>(&self, matcher: &'m Matcher) -> Vec<&'m str> {
        matcher
            .routes()
            .iter()
            .filter(|r| !self.routes.contains_key(&r.name))
            .map(|r| r.name.as_str())
            .collect()
    }

    /// The OpenAPI 3.1 document for `matcher`'s routes. `plans`: the configured order.
    pub fn openapi(&self, matcher: &Matcher, plans: &[String]) -> Value {
        let mut paths: BTreeMap<String, Map<String, Value>> = BTreeMap::new();
        for route in matcher.routes() {
            let fallback = RouteContract {
                summary: format!("{} ({:?})", route.name, route.handler),
                ..Default::default()
            };
            let c = self.routes.get(&route.name).unwrap_or(&fallback);
            let item = paths.entry(openapi_path(route)).or_default();
            // A WebSocket upgrade is a GET.
            let mut methods = route.methods.clone();
            if route.websocket && !methods.contains(&HttpMethod::GET) {
                methods.push(HttpMethod::GET);
            }
            let several = methods.len() > 1;
            for &m in &methods {
                let mut op = operation(route, c, m, plans);
                op["operationId"] = json!(operation_id(route, m, several));
                item.insert(m.as_str().to_ascii_lowercase(), op);
            }
        }
        let mut schemas = envelope_schemas();
        for (k, v) in &self.schemas {
            schemas.insert(k.clone(), v.clone());
        }
        let mut paths = json!(paths);
        let mut schemas = json!(schemas);
        for doc in [&mut paths, &mut schemas] {
            configured_enums(doc, plans);
        }
        json!({
            "openapi": "3.1.0",
            "info": {
                "title": "chainedge",
                "version": env!("CARGO_PKG_VERSION"),
                "description": "The edge data plane's HTTP API: JSON-RPC, the chain REST layers (/v1/eth, /v1/polygon, /v1/sol), streams, the console and admin routes. Built from the route manifests and their contract; every error is in its surface's envelope (components.schemas.*Error).",
            },
            "paths": paths,
            "components": {
                "schemas": schemas,
                "securitySchemes": {
                    "bearer": {"type": "http", "scheme": "bearer", "description": "An API key: Authorization: Bearer <key>"},
                    "xToken": {"type": "apiKey", "in": "header", "name": "x-token", "description": "An API key in x-token (the SDKs' form)"},
                    "consoleSession": {"type": "apiKey", "in": "cookie", "name": "nl_session", "description": "The console's session cookie"},
                    "csrfToken": {"type": "apiKey", "in": "header", "name": "X-CSRF-Token", "description": "Equal to the nl_csrf cookie, on every unsafe console request"},
                    "adminToken": {"type": "apiKey", "in": "header", "name": "X-Admin-Token", "description": "Admin routes: this header, or a loopback origin"},
                },
            },
        })
    }
}

/// A schema marked `x-configured: plans` takes the configured plan names as its enum:
/// what a field accepts there is this deployment's configuration, not a fixed list.
fn configured_enums(node: &mut Value, plans: &[String]) {
    match node {
        Value::Object(o) => {
            if o.get("x-configured").and_then(Value::as_str) == Some("plans") {
                o.remove("x-configured");
                o.insert("enum".into(), json!(plans));
            }
            o.values_mut().for_each(|v| configured_enums(v, plans));
        }
        Value::Array(a) => a.iter_mut().for_each(|v| configured_enums(v, plans)),
        _ => {}
    }
}

/// `/v1/x/{id}/{*rest}` → `/v1/x/{id}/{rest}` (OpenAPI has no multi-segment parameter;
/// the tail's description says it takes the rest of the path).
fn openapi_path(route: &Route) -> String {
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

fn operation(route: &Route, c: &RouteContract, method: HttpMethod, plans: &[String]) -> Value {
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

fn operation_id(route: &Route, method: HttpMethod, several: bool) -> String {
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

/// Each surface's error envelope (SPEC "Errors") with the extra fields codes add.
fn envelope_schemas() -> BTreeMap<String, Value> {
    let mut s = BTreeMap::new();
    s.insert(
        "ChainRestError".into(),
        json!({
            "type": "object",
            "required": ["error", "message"],
            "properties": {
                "error": {"type": "string", "description": "the code"},
                "message": {"type": "string"},
                "request_id": {"type": "string"},
                "current_tier": {"type": "string", "description": "tier_insufficient, rate_limited"},
                "required_tier": {"type": "string", "description": "tier_insufficient (also in X-Required-Tier)"},
                "upgrade_url": {"type": "string", "description": "tier_insufficient"},
                "required_scope": {"type": "string", "description": "tier_insufficient: the key lacks this scope"},
                "required_feature": {"type": "string", "description": "tier_insufficient: the tenant lacks this feature"},
                "retry_after_sec": {"type": "integer", "description": "rate_limited (also Retry-After)"},
                "limit_rps": {"type": "number", "description": "rate_limited"},
                "category": {"type": "string", "description": "rate_limited: the rate category, or compute_units"},
                "limit_cu_per_sec": {"type": "number", "description": "rate_limited on compute units"},
                "compute_units": {"type": "integer", "description": "rate_limited on compute units: what the request costs"},
                "restriction": {"type": "string", "description": "key_restricted, or rate_limited by the key's max_rps: the key restriction that refused"},
            },
        }),
    );
    s.insert(
        "ConsoleError".into(),
        json!({"type": "object", "required": ["error"], "properties": {"error": {"type": "string"}}}),
    );
    s.insert(
        "AdminError".into(),
        json!({"type": "object", "required": ["error"], "properties": {"error": {"type": "string", "description": "a message"}}}),
    );
    s.insert(
        "StreamError".into(),
        json!({"type": "object", "required": ["error", "code"], "properties": {"error": {"type": "string"}, "code": {"type": "integer", "description": "the HTTP status"}}}),
    );
    s.insert(
        "JsonRpcErrorResponse".into(),
        json!({
            "type": "object",
            "required": ["jsonrpc", "id", "error"],
            "properties": {
                "jsonrpc": {"const": "2.0"},
                "id": {"type": ["string", "number", "null"]},
                "error": {
                    "type": "object",
                    "required": ["code", "message"],
                    "properties": {
                        "code": {"type": "integer"},
                        "message": {"type": "string"},
                        "data": {
                            "type": "object",
                            "required": ["error"],
                            "description": "the edge's refusal: its code and the extra fields of ChainRestError",
                            "properties": {"error": {"type": "string"}, "request_id": {"type": "string"}},
                        },
                    },
                },
            },
        }),
    );
    s
}
