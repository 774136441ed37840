//! The plan and scope rules: whether a key's plan, scopes and tenant features reach what
//! a route (or a method family, or a path inside a route) requires, and the refusal
//! when they do not. Pure: the edge, the JSON-RPC gateway and the WebSocket channel all
//! ask these, so a refusal reads the same whichever way the call came in.

use crate::errors::ApiError;

/// The configured plans, lowest first, and where a refused caller can upgrade.
#[derive(Clone, Copy)]
pub struct Plans<'a> {
    pub order: &'a [String],
    pub upgrade_url: &'a str,
}

/// What a route asks of a key: a plan "X and above", scopes on the key, features on its
/// tenant. A stream route refuses with `tier_locked` (no upgrade offer mid-stream).
pub struct Requirement<'a> {
    pub min_plan: Option<&'a str>,
    pub scopes: &'a [String],
    pub features: &'a [String],
    pub stream: bool,
}

/// What a key holds: its tenant's plan and features, its own scopes.
pub struct Grants<'a> {
    pub plan: &'a str,
    pub scopes: &'a [String],
    pub features: &'a [String],
}

impl Plans<'_> {
    /// A plan's rank (0 the lowest); `None` for a plan not configured.
    pub fn rank(&self, plan: &str) -> Option<usize> {
        self.order.iter().position(|p| p == plan)
    }

    /// The plan first ("X and above"), then each scope, then each feature. A plan not
    /// configured ranks lowest; a required plan not configured asks nothing.
    pub fn admit(&self, has: &Grants, needs: &Requirement) -> Result<(), ApiError> {
        if let Some(required) = needs.min_plan {
            let (have, need) = (self.rank(has.plan).unwrap_or(0), self.rank(required));
            if need.is_some_and(|need| have < need) {
                if needs.stream {
                    return Err(locked(format!(
                        "plan {} does not include this route",
                        has.plan
                    )));
                }
                return Err(self.needs_plan(
                    has.plan,
                    required,
                    format!("this route needs plan {required} or above"),
                ));
            }
        }
        // The plan is high enough: a scope is granted per key and a feature per tenant,
        // so no upgrade would help. The tier fields name the caller's own plan;
        // `required_scope` / `required_feature` say what is missing.
        if let Some(scope) = needs.scopes.iter().find(|s| !has.scopes.contains(s)) {
            let message = format!(
                "this API key lacks the scope {scope}; create a key with it in the console"
            );
            return Err(self
                .needs_plan(has.plan, has.plan, message)
                .with_field("required_scope", scope.as_str()));
        }
        if let Some(feature) = needs.features.iter().find(|f| !has.features.contains(f)) {
            let message = format!("this tenant lacks the feature {feature}");
            if needs.stream {
                return Err(locked(message));
            }
            return Err(self
                .needs_plan(has.plan, has.plan, message)
                .with_field("required_feature", feature.as_str()));
        }
        Ok(())
    }

    /// "X and above" alone, for checks finer than a route's own (a path inside it).
    pub fn require(&self, plan: &str, required: &str) -> Result<(), ApiError> {
        match (self.rank(plan), self.rank(required)) {
            (Some(have), Some(need)) if have >= need => Ok(()),
            (_, None) => Ok(()),
            _ => Err(self.needs_plan(
                plan,
                required,
                format!("this path needs plan {required} or above"),
            )),
        }
    }

    /// The 403 of a plan too low, with this configuration's upgrade address.
    pub fn needs_plan(&self, current: &str, required: &str, message: String) -> ApiError {
        needs_plan(current, required, self.upgrade_url, message)
    }
}

/// The 403 `tier_insufficient` of a plan too low: both plans, where to upgrade, and
/// `X-Required-Tier`.
pub fn needs_plan(current: &str, required: &str, upgrade_url: &str, message: String) -> ApiError {
    ApiError::new(403, "tier_insufficient", message)
        .with_field("current_tier", current)
        .with_field("required_tier", required)
        .with_field("upgrade_url", upgrade_url)
        .with_header("X-Required-Tier", required.to_string())
}

/// The 403 of a key without the scope a JSON-RPC method family needs: its plan is no
/// obstacle (both tier fields name it), the key is. (A route's scope refusal, `admit`,
/// also carries the upgrade address and `X-Required-Tier` naming the caller's own plan.)
pub fn lacks_scope(plan: &str, scope: &str, message: String) -> ApiError {
    ApiError::new(403, "tier_insufficient", message)
        .with_field("current_tier", plan)
        .with_field("required_tier", plan)
        .with_field("required_scope", scope)
}

fn locked(message: String) -> ApiError {
    ApiError::new(403, "tier_locked", message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn refusal(r: Result<(), ApiError>) -> serde_json::Value {
        let e = r.expect_err("refused");
        let mut v = serde_json::Value::Object(e.extra.clone());
        v["code"] = e.code.into();
        v["status"] = e.status.into();
        v["message"] = e.message.clone().into();
        v["header"] = e
            .headers
            .iter()
            .find(|(n, _)| *n == "X-Required-Tier")
            .map(|(_, v)| v.clone())
            .into();
        v
    }

    #[test]
    fn a_plan_below_the_route_is_told_which_plan_and_where_to_upgrade() {
        let order = strings(&["free", "basic", "pro"]);
        let plans = Plans {
            order: &order,
            upgrade_url: "https://console.test/#plans",
        };
        let none: Vec<String> = Vec::new();
        let has = |plan| Grants {
            plan,
            scopes: &none,
            features: &none,
        };
        let route = |stream| Requirement {
            min_plan: Some("basic"),
            scopes: &none,
            features: &none,
            stream,
        };
        assert!(plans.admit(&has("basic"), &route(false)).is_ok());
        assert!(plans.admit(&has("pro"), &route(false)).is_ok());
        let v = refusal(plans.admit(&has("free"), &route(false)));
        assert_eq!(v["status"], 403);
        assert_eq!(v["code"], "tier_insufficient");
        assert_eq!(v["current_tier"], "free");
        assert_eq!(v["required_tier"], "basic");
        assert_eq!(v["upgrade_url"], "https://console.test/#plans");
        assert_eq!(v["header"], "basic");
        // A plan not configured ranks lowest; on a stream route the refusal is a lock.
        assert_eq!(
            refusal(plans.admit(&has("gold"), &route(false)))["code"],
            "tier_insufficient"
        );
        assert_eq!(
            refusal(plans.admit(&has("free"), &route(true)))["code"],
            "tier_locked"
        );
    }

    #[test]
    fn a_missing_scope_or_feature_is_named_and_no_upgrade_is_offered() {
        let order = strings(&["free", "pro"]);
        let plans = Plans {
            order: &order,
            upgrade_url: "u",
        };
        let (read, both) = (strings(&["rpc:read"]), strings(&["rpc:read", "rpc:write"]));
        let (none, metrics) = (Vec::new(), strings(&["eth.chain_metrics_el"]));
        let needs = Requirement {
            min_plan: None,
            scopes: &both,
            features: &metrics,
            stream: false,
        };
        let v = refusal(plans.admit(
            &Grants {
                plan: "pro",
                scopes: &read,
                features: &metrics,
            },
            &needs,
        ));
        assert_eq!(v["required_scope"], "rpc:write");
        assert_eq!(
            (v["current_tier"].as_str(), v["required_tier"].as_str()),
            (Some("pro"), Some("pro"))
        );
        assert_eq!(v["header"], "pro");
        let v = refusal(plans.admit(
            &Grants {
                plan: "pro",
                scopes: &both,
                features: &none,
            },
            &needs,
        ));
        assert_eq!(v["required_feature"], "eth.chain_metrics_el");
        assert_eq!(v["required_tier"], "pro");
        let granted = Grants {
            plan: "free",
            scopes: &both,
            features: &metrics,
        };
        assert!(plans.admit(&granted, &needs).is_ok());
    }

    #[test]
    fn require_compares_ranks_and_ignores_a_plan_not_configured() {
        let order = strings(&["free", "basic", "pro"]);
        let plans = Plans {
            order: &order,
            upgrade_url: "u",
        };
        assert!(plans.require("pro", "basic").is_ok());
        assert!(plans.require("basic", "basic").is_ok());
        assert!(plans.require("free", "nonesuch").is_ok());
        let v = refusal(plans.require("free", "pro"));
        assert_eq!(
            (v["current_tier"].as_str(), v["required_tier"].as_str()),
            (Some("free"), Some("pro"))
        );
        assert_eq!(v["message"], "this path needs plan pro or above");
        // An unknown current plan is below every configured one.
        assert!(plans.require("gold", "free").is_err());
        assert_eq!(plans.rank("basic"), Some(1));
        assert_eq!(plans.rank("gold"), None);
    }
}
