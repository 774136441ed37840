//! A route's contract entry as `plugins/contract/<surface>.yaml` writes it.

use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// What a route takes and answers beyond what its policy says.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteContract {
    pub summary: String,
    /// Path parameters' schemas, by name (a tail parameter takes the rest of the path).
    #[serde(default)]
    pub(super) params: BTreeMap<String, Value>,
    /// Query parameters.
    #[serde(default)]
    pub(super) query: BTreeMap<String, QueryParam>,
    /// The request body's schema (`body_type`, default JSON), when the route takes one.
    #[serde(default)]
    pub(super) body: Option<Value>,
    #[serde(default)]
    pub(super) body_type: Option<String>,
    /// The success status (default 200) and its body (`response_type`, default JSON).
    #[serde(default)]
    pub(super) status: Option<u16>,
    /// Other success statuses with the same body (a request applied at once, 200, or
    /// accepted for later, 202).
    #[serde(default)]
    pub(super) also_status: Vec<u16>,
    #[serde(default)]
    pub(super) response: Option<Value>,
    #[serde(default)]
    pub(super) response_type: Option<String>,
    /// The same answer in other content types, by type (`text/csv` of an export).
    #[serde(default)]
    pub(super) also: BTreeMap<String, Value>,
    /// Error codes by status that this route's handler gives, beyond its policy's.
    #[serde(default)]
    pub(super) errors: BTreeMap<u16, Vec<String>>,
    /// A proxy route: the node's own answers pass through with the node's status, so
    /// any status may carry the node's body instead of the edge's envelope.
    #[serde(default)]
    pub(super) passthrough: bool,
    /// What the route answers `tests/routes.rs`'s probe (a gateway with one anvil pool and
    /// a top-plan key with every scope), stated beside the route rather than in the test.
    #[serde(default, rename = "probe")]
    pub(super) _probe: Option<serde::de::IgnoredAny>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct QueryParam {
    pub(super) schema: Value,
    #[serde(default)]
    pub(super) required: bool,
    #[serde(default)]
    pub(super) description: Option<String>,
}
