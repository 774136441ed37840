//! The API contract as data: OpenAPI 3.1 built from the route table (`plugins/*.yaml`:
//! paths, methods, credentials, tiers, rate categories, envelopes) and each route's
//! schemas (`plugins/contract/<surface>.yaml`: parameters, bodies, the answer, the errors
//! only its handler gives). What every route of a kind can answer (401, 403, 405, 413,
//! 429, …) is derived here from its policy, in its surface's envelope, so the document
//! cannot drift from what the edge enforces. Served at `GET /openapi.json`, written to
//! `docs/openapi.json` by `chainedge openapi`.

mod entry;
mod operation;

use crate::config::ConfigError;
use crate::routes::matcher::Matcher;
use crate::routes::spec::HttpMethod;
pub use entry::RouteContract;
use operation::{openapi_path, operation, operation_id};
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
