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

/// What serves a route: one of the edge's generic transports, a channel of the channel
/// registry (`handlers::channels`), or a local handler of the handler registry
/// (`handlers::registry`), each by its place there. The manifest names one; a name that
/// is none of them is a configuration error (`chainedge -t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HandlerKind {
    /// A JSON-RPC body (or WebSocket session) through the gateway.
    JsonRpc,
    /// JSON-RPC to one named host of the route's pool.
    HostRpc,
    /// The route's `{*tail}` (and query) to its pool as it is: an operator's own
    /// passthrough to any node API (`pool` required).
    Passthrough,
    /// A channel: its index in the channel registry.
    Channel(u16),
    /// A local handler: its index in the registry.
    Local(u16),
}

/// The generic transports' manifest names.
const TRANSPORTS: &[(&str, HandlerKind)] = &[
    ("json_rpc", HandlerKind::JsonRpc),
    ("host_rpc", HandlerKind::HostRpc),
    ("passthrough", HandlerKind::Passthrough),
];

/// How a channel answers: what the servers need to know of it before it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelTransport {
    /// The node's answer through a rewriting passthrough (HTTP).
    Proxy,
    /// WebSocket frames to a node, untouched (served by Pingora's phases).
    ProxyWebSocket,
    /// An event stream (SSE) the edge writes.
    EventStream,
    /// A server-to-client WebSocket feed the edge writes.
    PushWebSocket,
}

/// What a channel's path decides before the guard runs (the beacon API's groups): the
/// plan and rate category of the path, the node families that serve it, and whether
/// its answer is a long-lived stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathRule {
    pub min_plan: &'static str,
    pub rate: &'static str,
    /// Host families that serve the path; `None`: every host of the pool.
    pub families: Option<&'static [&'static str]>,
    /// A long-lived answer (events): no read timeout, no compression.
    pub stream: bool,
}

/// A channel's path rule from the request path: the rule, or why the path is refused.
pub type PathRuleOf = fn(&str) -> Result<PathRule, crate::errors::ApiError>;

/// What the route table needs of a channel: its manifest name, its transport, the pool
/// it always uses (`None`: the route's own `pool`, which is then required), and its
/// rules that are checked when the table loads or before the guard.
#[derive(Debug, Clone, Copy)]
pub struct ChannelTraits {
    pub name: &'static str,
    /// What it is, in words for messages ("the MEV-Share stream").
    pub title: &'static str,
    pub transport: ChannelTransport,
    pub pool: Option<&'static str>,
    /// The route must name a pool (a passthrough to the route's own pool).
    pub needs_pool: bool,
    /// The channel is for one plan only, so its tier must be the highest plan.
    pub one_plan: bool,
    /// The path's own plan and rate category, checked before the guard.
    pub path_rule: Option<PathRuleOf>,
    /// Every rate category the path rule may choose (a limit configured for one of
    /// them is used even though no route names it).
    pub path_rates: &'static [&'static str],
}

impl ChannelTraits {
    /// A channel with no pool of its own and no rules.
    pub const fn new(name: &'static str, title: &'static str, transport: ChannelTransport) -> Self {
        ChannelTraits {
            name,
            title,
            transport,
            pool: None,
            needs_pool: false,
            one_plan: false,
            path_rule: None,
            path_rates: &[],
        }
    }

    /// The pool it always talks to.
    pub const fn pool(mut self, pool: &'static str) -> Self {
        self.pool = Some(pool);
        self
    }
}

impl HandlerKind {
    /// The kind a manifest's `handler:` names: a generic transport, else the channel of
    /// that name in `channels`, else the local handler of that name in `handlers` (each
    /// registry in order).
    pub fn resolve(
        name: &str,
        channels: &[ChannelTraits],
        handlers: &[&str],
    ) -> Option<HandlerKind> {
        let place = |at: usize| u16::try_from(at).ok();
        TRANSPORTS
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, k)| *k)
            .or_else(|| {
                let at = channels.iter().position(|c| c.name == name)?;
                place(at).map(HandlerKind::Channel)
            })
            .or_else(|| {
                let at = handlers.iter().position(|h| *h == name)?;
                place(at).map(HandlerKind::Local)
            })
    }
}
