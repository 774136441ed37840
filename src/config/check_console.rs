//! The `console` section checked (see `check.rs` for the contract every section's check
//! keeps): its origin, proxies, plans and prices, sessions, email codes, Google sign-in.

use super::check::{Bad, Serving};
use super::secrets::Secret;
use super::AppConfig;

/// `console`: its origin and trusted proxies, email codes, sessions, challenges, Google
/// sign-in. Returns the SMTP credentials and Google's client secret.
pub(super) fn console(
    app: &AppConfig,
    serving: &Serving,
    bad: &mut Bad,
) -> (Option<(Secret, Secret)>, Option<Secret>) {
    if let Some(o) = &app.console.origin {
        if !(o.starts_with("http://") || o.starts_with("https://")) || o.ends_with('/') {
            bad(
                "console.origin",
                format!("'{o}' must be an origin like https://console.example.com"),
            );
        }
    }
    for (i, p) in app.console.self_service_plans.iter().enumerate() {
        if !app.plans.contains(p) {
            bad(
                &format!("console.self_service_plans[{i}]"),
                format!("'{p}' is not one of plans"),
            );
        }
    }
    for (p, price) in &app.console.plan_prices {
        let at = format!("console.plan_prices.{p}");
        if !app.plans.contains(p) {
            bad(&at, format!("'{p}' is not one of plans"));
        }
        if !price.amount.is_finite() || price.amount < 0.0 {
            bad(&at, "amount must be a number from 0 up".into());
        }
        let c = &price.currency;
        if c.len() != 3 || !c.bytes().all(|b| b.is_ascii_uppercase()) {
            bad(
                &at,
                format!("currency '{c}' must be an ISO 4217 code like USD"),
            );
        }
        if !["month", "year"].contains(&price.per.as_str()) {
            bad(&at, format!("per '{}' must be month or year", price.per));
        }
    }
    for (i, p) in app.console.trusted_proxies.iter().enumerate() {
        if let Err(e) = crate::address::TrustedProxies::parse(&[p]) {
            bad(&format!("console.trusted_proxies[{i}]"), e);
        }
    }
    if app.console.session_ttl_secs < 2 || app.console.challenge_ttl_secs < 2 {
        bad(
            "console",
            "session_ttl_secs and challenge_ttl_secs must be at least 2".into(),
        );
    }
    if app.console.max_challenges_per_client < 1 || app.console.max_challenges_per_subject < 1 {
        bad(
            "console",
            "max_challenges_per_client and max_challenges_per_subject must be positive".into(),
        );
    }
    let smtp_credentials = email(app, serving, bad);
    let google_secret = google(app, serving, bad);
    (smtp_credentials, google_secret)
}

/// `console.email`: one delivery, the sender, code bounds and lock-out; the SMTP
/// credentials.
fn email(app: &AppConfig, serving: &Serving, bad: &mut Bad) -> Option<(Secret, Secret)> {
    let email = &app.console.email;
    if email.outbox.is_some() && email.smtp.is_some() {
        bad(
            "console.email",
            "choose one delivery: outbox (demo) or smtp".into(),
        );
    }
    if email.from.contains(['\r', '\n']) || !email.from.contains('@') {
        bad("console.email.from", "not a mailbox".into());
    }
    if email.code_ttl_secs < 60
        || email.max_attempts < 1
        || email.max_codes_per_15min < 1
        || email.max_codes_per_client_15min < 1
    {
        bad(
            "console.email",
            "code_ttl_secs must be at least 60; max_attempts, max_codes_per_15min and max_codes_per_client_15min positive"
                .into(),
        );
    }
    if email.lockout_secs < 1 || email.max_lockout_secs < email.lockout_secs {
        bad(
            "console.email",
            "lockout_secs must be positive and at most max_lockout_secs".into(),
        );
    }
    let smtp_credentials = match email.smtp.as_ref().map(|s| (&s.username, &s.password)) {
        Some((Some(u), Some(p))) => match (serving(u), serving(p)) {
            (Ok(u), Ok(p)) => u.zip(p),
            (Err(e), _) => {
                bad("console.email.smtp.username", e);
                None
            }
            (_, Err(e)) => {
                bad("console.email.smtp.password", e);
                None
            }
        },
        Some((None, None)) | None => None,
        Some(_) => {
            bad(
                "console.email.smtp",
                "username and password go together".into(),
            );
            None
        }
    };
    smtp_credentials
}

/// `console.google`: its endpoints, where sign-in lands, the client secret.
fn google(app: &AppConfig, serving: &Serving, bad: &mut Bad) -> Option<Secret> {
    match &app.console.google {
        Some(g) => {
            for (k, url) in [
                ("token_endpoint", &g.token_endpoint),
                ("jwks_uri", &g.jwks_uri),
            ] {
                if let Err(e) = crate::address::HostAddr::parse(url) {
                    bad(&format!("console.google.{k}"), e);
                }
            }
            for (k, url) in [
                ("authorization_endpoint", &g.authorization_endpoint),
                ("redirect_uri", &g.redirect_uri),
            ] {
                if !(url.starts_with("https://") || url.starts_with("http://")) {
                    bad(
                        &format!("console.google.{k}"),
                        "must be an http(s) URL".into(),
                    );
                }
            }
            if !g.after_login.starts_with('/') {
                bad(
                    "console.google.after_login",
                    "must be a path on this gateway".into(),
                );
            }
            match serving(&g.client_secret) {
                Ok(s) => s,
                Err(e) => {
                    bad("console.google.client_secret", e);
                    None
                }
            }
        }
        None => None,
    }
}
