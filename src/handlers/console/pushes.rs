//! The console's screens onto what a tenant's keys reach by API: transaction webhooks
//! (`/v1/console/tx-hooks…`), Solana watchlist entries (`/v1/console/sol-watchlist…`)
//! and a firehose token for one of its keys (`POST /v1/keys/{id}/firehose/{channel}`).
//! Each is the key route's own function, called with the session's tenant: the member's
//! role stands in for a key's scopes (viewers read, developers and owners change), and
//! the tenant's plan and features meet the key route's requirement as a key would.

use super::{db, explained, member_of, not_found, require, session};
use crate::auth::plans::{Grants, Plans, Requirement};
use crate::errors::ApiError;
use crate::handlers::sol::watchlist;
use crate::handlers::tx_hooks;
use crate::handlers::{Handler, Request, Services};
use crate::reply::Reply;
use crate::store::team::{Member, Role};

pub const HANDLERS: &[Handler] = &[
    Handler::new("console_tx_hooks_list", |s, r| {
        Box::pin(tx_hook(s, r, tx_hooks::Asked::List))
    })
    .form(),
    Handler::new("console_tx_hooks_create", |s, r| {
        Box::pin(tx_hook(s, r, tx_hooks::Asked::Create))
    })
    .form(),
    Handler::new("console_tx_hooks_delete", |s, r| {
        Box::pin(tx_hook(s, r, tx_hooks::Asked::Delete))
    })
    .form(),
    Handler::new("console_tx_hooks_deliveries", |s, r| {
        Box::pin(tx_hook(s, r, tx_hooks::Asked::Deliveries))
    })
    .form(),
    Handler::new("console_tx_hooks_dead_letters", |s, r| {
        Box::pin(tx_hook(s, r, tx_hooks::Asked::DeadLetters))
    })
    .form(),
    Handler::new("console_tx_hooks_test", |s, r| {
        Box::pin(tx_hook(s, r, tx_hooks::Asked::Test))
    })
    .form(),
    Handler::new("console_tx_hooks_retry", |s, r| {
        Box::pin(tx_hook(s, r, tx_hooks::Asked::Retry))
    })
    .form(),
    Handler::new("console_sol_watchlist_list", |s, r| {
        Box::pin(watch(s, r, watchlist::Asked::List))
    })
    .form(),
    Handler::new("console_sol_watchlist_create", |s, r| {
        Box::pin(watch(s, r, watchlist::Asked::Create))
    })
    .form(),
    Handler::new("console_sol_watchlist_delete", |s, r| {
        Box::pin(watch(s, r, watchlist::Asked::Delete))
    })
    .form(),
    Handler::new("console_sol_watchlist_deliveries", |s, r| {
        Box::pin(watch(s, r, watchlist::Asked::Deliveries))
    })
    .form(),
    Handler::new("console_sol_watchlist_dead_letters", |s, r| {
        Box::pin(watch(s, r, watchlist::Asked::DeadLetters))
    })
    .form(),
    Handler::new("console_sol_watchlist_test", |s, r| {
        Box::pin(watch(s, r, watchlist::Asked::Test))
    })
    .form(),
    Handler::new("console_sol_watchlist_retry", |s, r| {
        Box::pin(watch(s, r, watchlist::Asked::Retry))
    })
    .form(),
    Handler::new("console_keys_firehose", |s, r| Box::pin(firehose(s, r))).form(),
];

/// The key route a console route stands in for: its plan, scopes and features. One
/// the operator switched off is off here too, as the edge answers it (503).
fn key_route<'a>(s: &'a Services<'_>, name: &str) -> Result<&'a crate::routes::Route, ApiError> {
    let route = s.routes.iter().find(|r| r.name == name).ok_or_else(|| {
        ApiError::new(
            404,
            "route_disabled",
            format!("{name} is not served by this gateway"),
        )
    })?;
    let switched_on = route.switch.as_deref().is_none_or(|w| s.config.switch(w));
    if !route.enabled || !switched_on {
        let why = format!("{} is switched off", route.name);
        return Err(ApiError::new(503, "route_disabled", why));
    }
    Ok(route)
}

/// The session's member, when its role may do `asked` (reads: anyone; changes and
/// deliveries by hand: those who write keys) and its tenant reaches `route`.
async fn member_for(
    s: &Services<'_>,
    req: &Request<'_>,
    route: &str,
    changes: bool,
) -> Result<Member, ApiError> {
    let member = member_of(s.console(), session(req)?).await?;
    if changes {
        require(&member, Role::writes_keys, "change webhooks or watchlists")?;
    }
    let route = key_route(s, route)?;
    let tenant = db(s.console().store.tenant(&member.tenant_id))
        .await?
        .ok_or_else(|| ApiError::internal("a member without a tenant"))?;
    // The role stands in for the key's scopes: only plan and features can refuse.
    let has = Grants {
        plan: &tenant.plan,
        scopes: &route.scopes,
        features: &tenant.features,
    };
    admit(s, route, &has)?;
    Ok(member)
}

/// `route`'s plan, scopes and features against what the caller holds, as the edge's
/// guard checks them for a key.
fn admit(s: &Services<'_>, route: &crate::routes::Route, has: &Grants) -> Result<(), ApiError> {
    let app = &s.config.app;
    let plans = Plans {
        order: &app.plans,
        upgrade_url: &app.upgrade_url,
    };
    let needs = Requirement {
        min_plan: route.min_plan_name.as_deref(),
        scopes: &route.scopes,
        features: &route.features,
        stream: false,
    };
    plans.admit(has, &needs)
}

async fn tx_hook(
    s: &Services<'_>,
    req: &Request<'_>,
    asked: tx_hooks::Asked,
) -> Result<Reply, ApiError> {
    use tx_hooks::Asked::*;
    let (route, changes) = match asked {
        List => ("eth.tx_hooks.list", false),
        Create => ("eth.tx_hooks.create", true),
        Delete => ("eth.tx_hooks.delete", true),
        Deliveries => ("eth.tx_hooks.deliveries", false),
        DeadLetters => ("eth.tx_hooks.dead_letters", false),
        Test => ("eth.tx_hooks.test", true),
        Retry => ("eth.tx_hooks.retry", true),
    };
    let member = member_for(s, req, route, changes)
        .await
        .map_err(explained)?;
    let served = tx_hooks::serve(s, req, &member.tenant_id, asked).await;
    served.map_err(explained)
}

async fn watch(
    s: &Services<'_>,
    req: &Request<'_>,
    asked: watchlist::Asked,
) -> Result<Reply, ApiError> {
    use watchlist::Asked::*;
    let (route, changes) = match asked {
        List | Get => ("sol.watchlist.list", false),
        Create => ("sol.watchlist.create", true),
        Delete => ("sol.watchlist.delete", true),
        Deliveries => ("sol.watchlist.deliveries", false),
        DeadLetters => ("sol.watchlist.dead_letters", false),
        Test => ("sol.watchlist.test", true),
        Retry => ("sol.watchlist.retry", true),
    };
    let member = member_for(s, req, route, changes)
        .await
        .map_err(explained)?;
    let served = watchlist::serve(s.store(), s.sol_watch(), asked, &member.tenant_id, req).await;
    served.map_err(explained)
}

/// `POST /v1/keys/{id}/firehose/{logs|mempool}`: where the channel is and a token for
/// one of the tenant's keys, as the key would get it from
/// `GET /v1/polygon/firehose/{channel}` (its standing, plan, scopes and features
/// checked against that route). A token is a bearer credential: developers and owners
/// only, like a key's secret.
async fn firehose(s: &Services<'_>, req: &Request<'_>) -> Result<Reply, ApiError> {
    firehose_token(s, req).await.map_err(explained)
}

async fn firehose_token(s: &Services<'_>, req: &Request<'_>) -> Result<Reply, ApiError> {
    let member = member_of(s.console(), session(req)?).await?;
    require(&member, Role::writes_keys, "open the firehose")?;
    let key_id = req.params.first().map(String::as_str).unwrap_or("");
    let channel = req.params.get(1).map(String::as_str).unwrap_or("");
    if !crate::handlers::firehose::CHANNELS.contains(&channel) {
        return Err(not_found());
    }
    let owned = db(s.console().store.key_of_tenant(key_id, &member.tenant_id)).await?;
    if !owned {
        return Err(not_found());
    }
    let key = db(s.console().store.key_standing_by_id(key_id))
        .await?
        .ok_or_else(not_found)?;
    let route = key_route(s, &format!("polygon.firehose.{channel}"))?;
    let has = Grants {
        plan: &key.plan,
        scopes: &key.scopes,
        features: &key.features,
    };
    admit(s, route, &has)?;
    crate::handlers::firehose::connection(s, channel, &key)
}
