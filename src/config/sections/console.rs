//! The console's sections: sign-in (sessions, Google), the email codes and their delivery
//! (`deny_unknown_fields`, like every section).

use super::super::secrets::SecretRef;
use serde::Deserialize;
use std::path::PathBuf;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleConf {
    /// The one origin allowed to call console routes with credentials.
    #[serde(default)]
    pub origin: Option<String>,
    /// Proxy addresses whose `X-Forwarded-Proto` is believed.
    #[serde(default)]
    pub trusted_proxies: Vec<String>,
    /// Session lifetime; refreshed when less than half remains.
    #[serde(default = "d_session_ttl")]
    pub session_ttl_secs: i64,
    #[serde(default)]
    pub email: EmailConf,
    /// Lifetime of a wallet sign-in challenge.
    #[serde(default = "d_challenge_ttl")]
    pub challenge_ttl_secs: i64,
    /// Unexpired, unused wallet challenges (and Google sign-in states) one client address
    /// (an IPv6 /64) may hold: an anonymous client cannot grow the store beyond this.
    #[serde(default = "d_challenges_per_client")]
    pub max_challenges_per_client: i64,
    /// Unexpired, unused wallet challenges one wallet address may have outstanding.
    #[serde(default = "d_challenges_per_subject")]
    pub max_challenges_per_subject: i64,
    /// Google sign-in (OAuth 2.0 / OIDC authorization code with PKCE).
    #[serde(default)]
    pub google: Option<GoogleConf>,
    /// Plans a console user may move their tenant to at once; a request for any other
    /// plan waits for an operator (`chainedge tenants approve-plan`).
    #[serde(default)]
    pub self_service_plans: Vec<String>,
    /// What each plan costs, as the plans page shows it (a plan without one reads
    /// "price on request").
    #[serde(default)]
    pub plan_prices: std::collections::BTreeMap<String, PlanPrice>,
}

/// A plan's price: `amount` in `currency` (ISO 4217) per `per` (month or year).
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct PlanPrice {
    pub amount: f64,
    #[serde(default = "d_currency")]
    pub currency: String,
    #[serde(default = "d_per")]
    pub per: String,
}

fn d_currency() -> String {
    "USD".into()
}
fn d_per() -> String {
    "month".into()
}

/// An OIDC provider (Google by default; endpoints configurable for tests and other IdPs).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoogleConf {
    pub client_id: String,
    pub client_secret: SecretRef,
    /// Where the provider sends the browser back: this gateway's `/v1/auth/google/callback`.
    pub redirect_uri: String,
    #[serde(default = "d_google_issuer")]
    pub issuer: String,
    #[serde(default = "d_google_auth")]
    pub authorization_endpoint: String,
    #[serde(default = "d_google_token")]
    pub token_endpoint: String,
    #[serde(default = "d_google_jwks")]
    pub jwks_uri: String,
    /// Where the browser lands after signing in.
    #[serde(default = "d_after_login")]
    pub after_login: String,
}

fn d_google_issuer() -> String {
    "https://accounts.google.com".into()
}
fn d_google_auth() -> String {
    "https://accounts.google.com/o/oauth2/v2/auth".into()
}
fn d_google_token() -> String {
    "https://oauth2.googleapis.com/token".into()
}
fn d_google_jwks() -> String {
    "https://www.googleapis.com/oauth2/v3/certs".into()
}
fn d_after_login() -> String {
    "/console/".into()
}

/// Without a `console:` section the same defaults apply as with an empty one.
impl Default for ConsoleConf {
    fn default() -> Self {
        ConsoleConf {
            origin: None,
            trusted_proxies: Vec::new(),
            session_ttl_secs: d_session_ttl(),
            email: EmailConf::default(),
            challenge_ttl_secs: d_challenge_ttl(),
            max_challenges_per_client: d_challenges_per_client(),
            max_challenges_per_subject: d_challenges_per_subject(),
            google: None,
            self_service_plans: Vec::new(),
            plan_prices: Default::default(),
        }
    }
}

fn d_session_ttl() -> i64 {
    30 * 86400
}
fn d_challenge_ttl() -> i64 {
    300
}
fn d_challenges_per_client() -> i64 {
    20
}
fn d_challenges_per_subject() -> i64 {
    5
}

/// One-time sign-in codes by email: delivered over SMTP, or (demo) appended to a file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmailConf {
    #[serde(default = "d_from")]
    pub from: String,
    /// Demo delivery: each message is appended to this file instead of being sent.
    #[serde(default)]
    pub outbox: Option<PathBuf>,
    #[serde(default)]
    pub smtp: Option<SmtpConf>,
    #[serde(default = "d_code_ttl")]
    pub code_ttl_secs: i64,
    /// Wrong guesses allowed per code.
    #[serde(default = "d_code_attempts")]
    pub max_attempts: i64,
    /// Codes one address may be sent per 15 minutes.
    #[serde(default = "d_codes_per_window")]
    pub max_codes_per_15min: i64,
    /// Codes one client address (an IPv6 /64) may have mailed per 15 minutes, to any
    /// addresses: bounds the mail and the rows an anonymous client can cause.
    #[serde(default = "d_codes_per_client")]
    pub max_codes_per_client_15min: i64,
    /// First lock-out of an address after `max_attempts` wrong guesses (seconds); each
    /// further `max_attempts` wrong guesses doubles it, up to `max_lockout_secs`. Asking
    /// for a new code resets none of it; a right code does.
    #[serde(default = "d_lockout")]
    pub lockout_secs: i64,
    #[serde(default = "d_max_lockout")]
    pub max_lockout_secs: i64,
}

impl Default for EmailConf {
    fn default() -> Self {
        EmailConf {
            from: d_from(),
            outbox: None,
            smtp: None,
            code_ttl_secs: d_code_ttl(),
            max_attempts: d_code_attempts(),
            max_codes_per_15min: d_codes_per_window(),
            max_codes_per_client_15min: d_codes_per_client(),
            lockout_secs: d_lockout(),
            max_lockout_secs: d_max_lockout(),
        }
    }
}

fn d_from() -> String {
    "chainedge <login@chainedge.invalid>".into()
}
fn d_code_ttl() -> i64 {
    600
}
fn d_code_attempts() -> i64 {
    5
}
fn d_codes_per_window() -> i64 {
    5
}
fn d_codes_per_client() -> i64 {
    20
}
fn d_lockout() -> i64 {
    60
}
fn d_max_lockout() -> i64 {
    86400
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmtpConf {
    pub host: String,
    #[serde(default = "d_smtp_port")]
    pub port: u16,
    /// `none` (plain, local relays and tests), `starttls` or `tls`.
    #[serde(default)]
    pub security: SmtpSecurity,
    #[serde(default)]
    pub username: Option<SecretRef>,
    #[serde(default)]
    pub password: Option<SecretRef>,
}

fn d_smtp_port() -> u16 {
    587
}

#[derive(Debug, Default, Clone, Copy, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum SmtpSecurity {
    None,
    #[default]
    Starttls,
    Tls,
}
