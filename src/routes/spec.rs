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
    pub handler: HandlerKind,
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

/// What serves a route. The manifest names one of these; `chainedge -t` refuses any other.
/// Kinds not built yet answer 501 `not_implemented` in the route's envelope.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HandlerKind {
    // Transports and passthroughs.
    JsonRpc,
    BeaconProxy,
    BeaconEvents,
    MevShareSse,
    RelayData,
    BuilderRpc,
    PrivateRpc,
    HostRpc,
    HeimdallProxy,
    /// The route's `{*tail}` (and query) to its pool as it is: an operator's own
    /// passthrough to any node API (`pool` required).
    Passthrough,
    BasePortalWs,
    BasePage,
    /// `GET /openapi.json`: the API's contract.
    Openapi,
    FirehoseWs,
    SolWatchlistWs,
    // Console.
    ConsoleMe,
    ConsoleLogout,
    ConsoleKeysList,
    ConsoleKeysCreate,
    ConsoleKeysRevoke,
    ConsoleKeysRotate,
    ConsoleKeysUsage,
    ConsoleEmailStart,
    ConsoleEmailVerify,
    ConsoleGoogleStart,
    ConsoleGoogleCallback,
    ConsoleWalletChallenge,
    ConsoleWalletVerify,
    ConsolePage,
    // Admin and fleet.
    MeshHealth,
    PolygonMeshHealth,
    MeshHosts,
    MetricsMirror,
    PolygonMetricsMirror,
    AdminUsage,
    // Ethereum product endpoints.
    EthWalletBalance,
    EthWalletTokens,
    EthWalletNfts,
    EthWalletHistory,
    EthMempoolSnapshot,
    EthMempoolStats,
    EthSenderRaw,
    EthSenderBundle,
    EthValidatorIntel,
    EthValidatorSeries,
    EthPeerGraph,
    EthPeerGraphHost,
    // Polygon product endpoints.
    PolygonWalletBalance,
    PolygonWalletTokens,
    PolygonWalletNfts,
    PolygonWalletHistory,
    PolygonMempoolSnapshot,
    PolygonMempoolStats,
    PolygonValidators,
    PolygonCheckpoint,
    PolygonSpan,
    PolygonTraceReplay,
    PolygonTraceCall,
    PolygonSenderRaw,
    PolygonFirehoseInfo,
    // Solana product endpoints.
    SolWatchlistList,
    SolWatchlistCreate,
    SolWatchlistGet,
    SolWatchlistDelete,
    SolWatchlistDeadLetters,
    SolAccountSnapshot,
    SolStakeLatest,
    SolStakeEpoch,
    SolStakeByVoter,
    SolStakeHistory,
    SolWalletBalance,
    SolWalletTokens,
    SolWalletNfts,
    SolWalletHistory,
    SolMevCacheHosts,
    SolMevCacheLeaderboard,
    SolMevCacheHostMetrics,
    SolMevCacheHostSeries,
    SolSenderTx,
    SolSenderBundle,
    SolMempoolSnapshot,
    SolMempoolStats,
}

impl HandlerKind {
    /// The console JSON API routes (`/v1/auth/*`, `/v1/keys*`), answered by `console::api`.
    pub fn is_console_api(self) -> bool {
        matches!(
            self,
            HandlerKind::ConsoleMe
                | HandlerKind::ConsoleLogout
                | HandlerKind::ConsoleKeysList
                | HandlerKind::ConsoleKeysCreate
                | HandlerKind::ConsoleKeysRevoke
                | HandlerKind::ConsoleKeysRotate
                | HandlerKind::ConsoleKeysUsage
                | HandlerKind::ConsoleEmailStart
                | HandlerKind::ConsoleEmailVerify
                | HandlerKind::ConsoleWalletChallenge
                | HandlerKind::ConsoleWalletVerify
                | HandlerKind::ConsoleGoogleStart
                | HandlerKind::ConsoleGoogleCallback
        )
    }
}
