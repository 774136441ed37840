//! The plans page's routes: every plan and what it allows (public, from the
//! configuration), and a tenant's plan change request: applied at once for a plan the
//! operator made self-service (`console.self_service_plans`), else waiting for an
//! operator's `chainedge tenants approve-plan`.

use super::{bad, json_reply, member_of, parse, require, session};
use crate::auth::keys::KeyAuth;
use crate::config::limits::LimitsConf;
use crate::config::Loaded;
use crate::console::{db, Console};
use crate::errors::ApiError;
use crate::handlers::Request;
use crate::reply::Reply;
use crate::routes::spec::Credential;
use crate::routes::Route;
use crate::store::plan_requests::PlanRequest;
use crate::store::team::Role;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// A plan's limits as the console shows them: the request rate of every rate category
/// (the default, and the categories that set their own), the burst over it, the compute
/// units per second.
pub(super) fn plan_limits(limits: &LimitsConf, plan: &str) -> Value {
    let categories: std::collections::BTreeMap<&str, f64> = limits
        .categories
        .iter()
        .filter_map(|(category, per_plan)| Some((category.as_str(), *per_plan.get(plan)?)))
        .collect();
    json!({
        "name": plan,
        "requests_per_second": limits.default.get(plan),
        "burst": limits.burst,
        "categories": categories,
        "compute_units_per_second": limits.compute_units.get(plan),
    })
}

/// `GET /v1/plans`: every configured plan, lowest first: its limits and price, whether
/// a user may move to it without an operator, and the key routes it opens that the plan
/// below it does not (`opens`; a plan opens everything below it too).
pub(super) fn list(config: &Loaded, routes: &[Arc<Route>]) -> Result<Reply, ApiError> {
    let app = &config.app;
    let plans: Vec<Value> = app
        .plans
        .iter()
        .map(|p| {
            let mut v = plan_limits(&app.limits, p);
            v["self_service"] = json!(app.console.self_service_plans.contains(p));
            v["price"] = json!(app.console.plan_prices.get(p));
            v["opens"] = opened_at(config, routes, p, p == &app.plans[0]);
            v
        })
        .collect();
    json_reply(200, json!({ "plans": plans }))
}

/// The key routes served now (enabled, their switch on) whose lowest plan is `plan`
/// (for the lowest plan, those that name none too), as `{name, methods, path}`.
fn opened_at(config: &Loaded, routes: &[Arc<Route>], plan: &str, lowest: bool) -> Value {
    let opened: Vec<Value> = routes
        .iter()
        .filter(|r| {
            let keyed = [
                Credential::ApiKey,
                Credential::OptionalApiKey,
                Credential::AdminOrApiKey,
            ];
            let switched_on = r.switch.as_deref().is_none_or(|w| config.switch(w));
            r.enabled && switched_on && keyed.contains(&r.credential)
        })
        .filter(|r| match r.min_plan_name.as_deref() {
            Some(p) => p == plan,
            None => lowest,
        })
        .map(|r| {
            let methods: Vec<&str> = r.methods.iter().map(|m| m.as_str()).collect();
            json!({"name": r.name, "methods": methods, "path": r.path, "websocket": r.websocket})
        })
        .collect();
    Value::Array(opened)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Asked {
    plan: String,
}

fn request_json(r: &PlanRequest) -> Value {
    json!({
        "plan": r.plan,
        "from_plan": r.from_plan,
        "status": r.status,
        "requested_at": super::super::rfc3339(r.created_at),
        "decided_at": r.decided_at.map(super::super::rfc3339),
    })
}

/// `POST /v1/plan/request` `{"plan"}`: 200 with the request `applied` (a self-service
/// plan: the tenant's keys meet it on their next request), 202 `pending` otherwise.
pub(super) async fn ask(
    config: &Loaded,
    console: &Console,
    keys: &KeyAuth,
    req: &Request<'_>,
) -> Result<Reply, ApiError> {
    let member = member_of(console, session(req)?).await?;
    require(&member, Role::manages_team, "ask for a plan change")?;
    let (tenant, user) = (&member.tenant_id, &member.user.id);
    let plan = parse::<Asked>(&req.body)?.plan;
    let app = &config.app;
    if !app.plans.contains(&plan) {
        return Err(bad("invalid_request", "no such plan"));
    }
    let current = db(console.store.tenant(tenant))
        .await?
        .map(|t| t.plan)
        .unwrap_or_default();
    if current == plan {
        return Err(ApiError::new(
            409,
            "plan_unchanged",
            "the tenant is on that plan already",
        ));
    }
    let apply = app.console.self_service_plans.contains(&plan);
    let asked = db(console.store.request_plan(tenant, user, &plan, apply)).await?;
    if apply {
        keys.evict_tenant(tenant);
        if let Some(url) = &config.cluster_redis {
            if let Err(e) = crate::cluster::publish_tenant_changed(url.expose(), tenant).await {
                log::warn!("plan change not announced ({e}); instances notice within auth.key_cache_ttl_ms");
            }
        }
    }
    json_reply(
        if apply { 200 } else { 202 },
        json!({ "request": request_json(&asked) }),
    )
}

/// `GET /v1/plan/request`: the tenant's latest request (`null`: none).
pub(super) async fn current(console: &Console, req: &Request<'_>) -> Result<Reply, ApiError> {
    let member = member_of(console, session(req)?).await?;
    let asked = db(console.store.plan_request(&member.tenant_id)).await?;
    json_reply(200, json!({ "request": asked.as_ref().map(request_json) }))
}
