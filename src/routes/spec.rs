//! The shape of one `plugins/*.yaml` manifest: a product surface and its routes' policies.

use crate::errors::Envelope;
use serde::Deserialize;

/// A manifest file: one product surface.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// Must equal the file stem (`eth` for `plugins/eth.yaml`).
    pub surface: String,
    /// Default error envelope of this surface's routes.
    pub envelope: Envelope,
    /// Default CORS policy of this surface's routes.
    pub cors: CorsPolicy,
    /// Default credential of this surface's routes.
    #[serde(default = "default_credential")]
    pub credential: Credential,
    pub routes: Vec<RouteSpec>,
}

fn default_credential() -> Credential {
    Credential::ApiKey
}

/// One route: how it is matched and every policy the edge applies before dispatch.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteSpec {
    /// Stable name used in metrics and the access log (`polygon.wallet.balance`).
    pub name: String,
    pub methods: Vec<HttpMethod>,
    /// Segments: literal, `{param}`, or a final `{*tail}` that takes the rest of the path.
    pub path: String,
    /// A transport or a local handler's name (`HandlerKind::resolve`).
    pub handler: String,
    #[serde(default)]
    pub credential: Option<Credential>,
    /// Lowest plan admitted ("and above"); plans are ordered in the app config.
    #[serde(default)]
    pub tier: Option<String>,
    #[serde(default)]
    pub scopes: Vec<String>,
    #[serde(default)]
    pub features: Vec<String>,
    /// Rate category of the tier × category limiter.
    #[serde(default)]
    pub rate: Option<String>,
    /// Upstream pool the handler uses.
    #[serde(default)]
    pub pool: Option<String>,
    #[serde(default)]
    pub envelope: Option<Envelope>,
    #[serde(default)]
    pub cors: Option<CorsPolicy>,
    /// A GET carrying `Upgrade: websocket` is admitted in addition to `methods`.
    #[serde(default)]
    pub websocket: bool,
    /// The route answers only when this app-config switch is on (`base_native`).
    #[serde(default)]
    pub switch: Option<String>,
    /// `false` refuses the route (a channel that is switched off for good).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// The route exists only on an edge deployment (`base_mode: edge`); at the origin it
    /// is not in the table at all.
    #[serde(default)]
    pub edge_only: bool,
    /// Free text for operators: what the route does, where SPEC left the path open.
    #[serde(default)]
    #[allow(dead_code)] // documentation for operators; accepted, not used at run time
    pub doc: Option<String>,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, PartialOrd, Ord)]
#[allow(clippy::upper_case_acronyms)] // manifests spell methods as HTTP does
pub enum HttpMethod {
    GET,
    HEAD,
    POST,
    PUT,
    PATCH,
    DELETE,
    OPTIONS,
}

impl HttpMethod {
    pub fn parse(m: &str) -> Option<Self> {
        Some(match m {
            "GET" => Self::GET,
            "HEAD" => Self::HEAD,
            "POST" => Self::POST,
            "PUT" => Self::PUT,
            "PATCH" => Self::PATCH,
            "DELETE" => Self::DELETE,
            "OPTIONS" => Self::OPTIONS,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::GET => "GET",
            Self::HEAD => "HEAD",
            Self::POST => "POST",
            Self::PUT => "PUT",
            Self::PATCH => "PATCH",
            Self::DELETE => "DELETE",
            Self::OPTIONS => "OPTIONS",
        }
    }
}

/// Who the caller must prove to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Credential {
    /// No credential (sign-in flows, the console page).
    None,
    /// `Authorization: Bearer` or `x-token` API key, required.
    ApiKey,
    /// API key optional: anonymous callers are admitted at the anonymous limit.
    OptionalApiKey,
    /// `Authorization: Bearer` only (MEV-Share stream).
    Bearer,
    /// Console cookie session; CSRF on unsafe methods.
    Session,
    /// Loopback origin or a valid `X-Admin-Token`; never an API key.
    Admin,
    /// Admin (as above) or an API key on the route's tier.
    AdminOrApiKey,
}

impl Credential {
    /// Whether an admin may call the route (then where the request came from matters).
    pub fn admits_admin(self) -> bool {
        matches!(self, Credential::Admin | Credential::AdminOrApiKey)
    }
}

/// Cross-origin policy of a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CorsPolicy {
    /// Any origin, no cookies (dapps calling `/rpc/eth` and chain REST).
    Public,
    /// Only the configured console origin, with credentials.
    Console,
    /// No cross-origin access (admin).
    None,
}

/// What serves a route: one of the edge's own transports, or a local handler of the
/// registry (`handlers::registry`) by its place there. The manifest names either; a name
/// that is neither is a configuration error (`chainedge -t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HandlerKind {
    JsonRpc,
    BeaconProxy,
    BeaconEvents,
    MevShareSse,
    RelayData,
    HostRpc,
    HeimdallProxy,
    /// The route's `{*tail}` (and query) to its pool as it is: an operator's own
    /// passthrough to any node API (`pool` required).
    Passthrough,
    BasePortalWs,
    FirehoseWs,
    SolWatchlistWs,
    TxStatusWs,
    /// A local handler: its index in the registry.
    Local(u16),
}

/// The transports' manifest names.
const TRANSPORTS: &[(&str, HandlerKind)] = &[
    ("json_rpc", HandlerKind::JsonRpc),
    ("beacon_proxy", HandlerKind::BeaconProxy),
    ("beacon_events", HandlerKind::BeaconEvents),
    ("mev_share_sse", HandlerKind::MevShareSse),
    ("relay_data", HandlerKind::RelayData),
    ("host_rpc", HandlerKind::HostRpc),
    ("heimdall_proxy", HandlerKind::HeimdallProxy),
    ("passthrough", HandlerKind::Passthrough),
    ("base_portal_ws", HandlerKind::BasePortalWs),
    ("firehose_ws", HandlerKind::FirehoseWs),
    ("sol_watchlist_ws", HandlerKind::SolWatchlistWs),
    ("tx_status_ws", HandlerKind::TxStatusWs),
];

impl HandlerKind {
    /// The kind a manifest's `handler:` names: a transport, else the local handler of
    /// that name in `handlers` (the registry's names, in order).
    pub fn resolve(name: &str, handlers: &[&str]) -> Option<HandlerKind> {
        TRANSPORTS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, k)| *k)
            .or_else(|| {
                let at = handlers.iter().position(|h| *h == name)?;
                u16::try_from(at).ok().map(HandlerKind::Local)
            })
    }
}
