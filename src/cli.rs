//! Admin CLI against the configured store: tenants and API keys.
//! A new key's secret is printed exactly once, on stdout, and never stored.

use crate::config::Loaded;
use crate::store::sql::StoreError;
use crate::store::{Store, Target};
use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Manage tenants (plan, features).
    #[command(subcommand)]
    Tenants(TenantCmd),
    /// Manage API keys.
    #[command(subcommand)]
    Keys(KeyCmd),
    /// Print the API's OpenAPI 3.1 document (the route table and plugins/contract/).
    Openapi {
        /// Fail when a route of the table has no contract.
        #[arg(long)]
        strict: bool,
    },
}

#[derive(Subcommand, Debug)]
pub enum TenantCmd {
    /// List tenants oldest first, one JSON object per line (id, name, plan, features,
    /// billing, users, active keys).
    List {
        /// Only tenants on this plan.
        #[arg(long)]
        plan: Option<String>,
        /// At most this many (1 to 100000).
        #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(i64).range(1..=100_000))]
        limit: i64,
    },
    /// One tenant with its users and keys (never secrets), as one JSON object.
    Show {
        #[arg(long)]
        tenant: String,
    },
    /// Create a tenant; prints its id.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long)]
        plan: String,
    },
    /// Change a tenant's plan and, optionally, its trial / subscription end.
    SetPlan {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        plan: String,
        /// RFC 3339 time or unix seconds; `none` clears it.
        #[arg(long, value_parser = parse_when)]
        trial_ends: Option<When>,
        /// RFC 3339 time or unix seconds; `none` clears it. When set, it decides
        /// standing and the trial end is ignored.
        #[arg(long, value_parser = parse_when)]
        subscription_ends: Option<When>,
    },
    /// Replace a tenant's features (comma-separated, e.g. eth.chain_metrics_el).
    SetFeatures {
        #[arg(long)]
        tenant: String,
        #[arg(long, value_delimiter = ',')]
        features: Vec<String>,
    },
    /// Plan change requests from the console waiting for an operator, oldest first, one
    /// JSON object per line.
    PlanRequests,
    /// Move a tenant to the plan its pending request asks for, which must be `--plan`
    /// (a request replaced since it was read is not approved).
    ApprovePlan {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        plan: String,
    },
    /// Refuse a tenant's pending plan request (its plan stays); with `--plan`, only a
    /// request for that plan.
    RejectPlan {
        #[arg(long)]
        tenant: String,
        #[arg(long)]
        plan: Option<String>,
    },
}

#[derive(Subcommand, Debug)]
pub enum KeyCmd {
    /// Create a key; prints the secret once on stdout (its id on stderr).
    Create {
        #[arg(long)]
        tenant: String,
        #[arg(long, default_value = "cli")]
        name: String,
        /// Comma-separated; without it the key gets rpc:read,rpc:write.
        #[arg(long, value_delimiter = ',')]
        scopes: Vec<String>,
        /// What the key is narrowed to, as JSON (docs/api.md, "Key restrictions").
        #[arg(long)]
        restrictions: Option<String>,
    },
    /// Replace a key's restrictions (JSON; `{}` lifts them). Running instances apply
    /// them at once with `cluster.redis`, else within `auth.key_cache_ttl_ms`.
    Restrict {
        #[arg(long)]
        id: String,
        #[arg(long)]
        restrictions: String,
    },
    /// List a tenant's keys (never secrets), one JSON object per line.
    List {
        #[arg(long)]
        tenant: String,
    },
    /// Revoke a key by id.
    Revoke {
        #[arg(long)]
        id: String,
    },
}

/// The JSON-RPC method table each pool admits, for `chainedge -t`.
pub fn method_table(cfg: &Loaded) -> String {
    crate::jsonrpc::methods::table_report(cfg.app.pools.iter().map(|(n, p)| (n, &p.methods)))
}

/// `chainedge openapi`: the document on stdout; `--strict` refuses routes without a
/// contract, naming them.
pub fn openapi(loaded: &crate::app::Loaded, strict: bool) -> ExitCode {
    let missing = loaded.routes_without_contract();
    if strict && !missing.is_empty() {
        eprintln!("chainedge: routes without a contract in plugins/contract/: {missing:?}");
        return ExitCode::from(1);
    }
    match serde_json::to_string_pretty(&loaded.openapi()) {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("chainedge: {e}");
            ExitCode::from(1)
        }
    }
}

pub fn run(cmd: &Command, cfg: &Loaded) -> ExitCode {
    match execute(cmd, cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("chainedge: {e}");
            ExitCode::from(1)
        }
    }
}

fn execute(cmd: &Command, cfg: &Loaded) -> Result<(), String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("runtime: {e}"))?
        .block_on(execute_on_store(cmd, cfg))
}

async fn execute_on_store(cmd: &Command, cfg: &Loaded) -> Result<(), String> {
    let target = Target::from_config(cfg).map_err(|e| e.to_string())?;
    let store = Store::open(&target)
        .await
        .map_err(|e| format!("store ({}): {e}", target.describe()))?;
    match cmd {
        Command::Openapi { .. } => Err("openapi is answered without the store".into()),
        Command::Tenants(t) => tenant_command(t, &store, cfg).await,
        Command::Keys(k) => key_command(k, &store, cfg).await,
    }
}

fn db(e: StoreError) -> String {
    format!("store: {e}")
}

fn check_plan(cfg: &Loaded, plan: &str) -> Result<(), String> {
    if cfg.app.plans.iter().any(|p| p == plan) {
        Ok(())
    } else {
        Err(format!(
            "unknown plan '{plan}'; plans are {:?}",
            cfg.app.plans
        ))
    }
}

async fn must_exist(store: &Store, tenant: &str) -> Result<(), String> {
    if store.tenant_exists(tenant).await.map_err(db)? {
        Ok(())
    } else {
        Err(format!("no tenant with id {tenant}"))
    }
}

async fn tenant_command(cmd: &TenantCmd, store: &Store, cfg: &Loaded) -> Result<(), String> {
    match cmd {
        TenantCmd::List { plan, limit } => {
            if let Some(p) = plan {
                check_plan(cfg, p)?;
            }
            for t in store
                .list_tenants(plan.as_deref(), *limit)
                .await
                .map_err(db)?
            {
                println!("{}", serde_json::to_string(&t).unwrap_or_default());
            }
        }
        TenantCmd::Show { tenant } => {
            let t = store
                .tenant(tenant)
                .await
                .map_err(db)?
                .ok_or_else(|| format!("no tenant with id {tenant}"))?;
            let mut shown = serde_json::to_value(&t).unwrap_or_default();
            shown["users"] = serde_json::to_value(store.tenant_users(tenant).await.map_err(db)?)
                .unwrap_or_default();
            shown["keys"] = serde_json::to_value(store.list_keys(tenant).await.map_err(db)?)
                .unwrap_or_default();
            println!(
                "{}",
                serde_json::to_string_pretty(&shown).unwrap_or_default()
            );
        }
        TenantCmd::Create { name, plan } => {
            check_plan(cfg, plan)?;
            println!("{}", store.create_tenant(name, plan).await.map_err(db)?);
        }
        TenantCmd::SetPlan {
            tenant,
            plan,
            trial_ends,
            subscription_ends,
        } => {
            check_plan(cfg, plan)?;
            must_exist(store, tenant).await?;
            store.set_plan(tenant, plan).await.map_err(db)?;
            store
                .set_billing(
                    tenant,
                    trial_ends.map(|w| w.0),
                    subscription_ends.map(|w| w.0),
                )
                .await
                .map_err(db)?;
            announce_tenant(cfg, tenant).await;
        }
        TenantCmd::SetFeatures { tenant, features } => {
            crate::auth::check_known("feature", features, crate::auth::FEATURES)?;
            must_exist(store, tenant).await?;
            store.set_features(tenant, features).await.map_err(db)?;
            announce_tenant(cfg, tenant).await;
        }
        TenantCmd::PlanRequests => {
            for r in store.pending_plan_requests().await.map_err(db)? {
                println!("{}", serde_json::to_string(&r).unwrap_or_default());
            }
        }
        TenantCmd::ApprovePlan { tenant, plan }
        | TenantCmd::RejectPlan {
            tenant,
            plan: Some(plan),
        } => {
            decide(
                cfg,
                store,
                tenant,
                matches!(cmd, TenantCmd::ApprovePlan { .. }),
                Some(plan),
            )
            .await?;
        }
        TenantCmd::RejectPlan { tenant, plan: None } => {
            decide(cfg, store, tenant, false, None).await?;
        }
    }
    Ok(())
}

/// Approve or reject a tenant's pending plan request (only one for `plan`, when named).
async fn decide(
    cfg: &Loaded,
    store: &crate::store::Store,
    tenant: &str,
    approve: bool,
    plan: Option<&str>,
) -> Result<(), String> {
    use crate::store::plan_requests::Decision;
    let decided = match store
        .decide_plan_request(tenant, approve, plan)
        .await
        .map_err(db)?
    {
        Decision::Decided(d) => d,
        Decision::NothingPending => {
            return Err(format!("tenant {tenant} has no pending plan request"))
        }
        Decision::OtherPlan(pending) => {
            return Err(format!(
                "tenant {tenant}'s pending request is for plan {pending}, not {}; nothing decided",
                plan.unwrap_or_default()
            ))
        }
    };
    eprintln!(
        "{tenant}: {} {} (was {})",
        decided.status, decided.plan, decided.from_plan
    );
    if approve {
        announce_tenant(cfg, tenant).await;
    }
    Ok(())
}

/// Restrictions given on the command line, checked as the console checks them.
fn parse_restrictions(json: &str) -> Result<crate::key_restrictions::RestrictionsDoc, String> {
    let asked: crate::key_restrictions::RestrictionsDoc =
        serde_json::from_str(json).map_err(|e| format!("--restrictions: {e}"))?;
    asked
        .checked(crate::clock::now())
        .map_err(|e| format!("--restrictions: {e}"))
}

/// A key changed (revoked, restricted): running instances drop it from their key caches
/// at once (and end its open sessions) when the notice reaches them over Redis.
async fn announce_key(cfg: &Loaded, hash: &[u8; 32]) {
    if let Some(url) = &cfg.cluster_redis {
        if let Err(e) = crate::cluster::publish_revoked(url.expose(), hash).await {
            eprintln!("warning: change not announced ({e}); instances notice within auth.key_cache_ttl_ms");
        }
    }
}

async fn key_command(cmd: &KeyCmd, store: &Store, cfg: &Loaded) -> Result<(), String> {
    match cmd {
        KeyCmd::Create {
            tenant,
            name,
            scopes,
            restrictions,
        } => {
            let restrictions = restrictions
                .as_deref()
                .map(parse_restrictions)
                .transpose()?
                .unwrap_or_default();
            crate::auth::check_known("scope", scopes, crate::auth::SCOPES)?;
            let defaults: Vec<String> = crate::auth::DEFAULT_SCOPES
                .iter()
                .map(|s| s.to_string())
                .collect();
            let scopes = if scopes.is_empty() { &defaults } else { scopes };
            must_exist(store, tenant).await?;
            let (id, raw) = store
                .create_key(tenant, None, name, scopes, false, &restrictions)
                .await
                .map_err(db)?;
            eprintln!("key id {id}");
            println!("{raw}");
        }
        KeyCmd::List { tenant } => {
            for k in store.list_keys(tenant).await.map_err(db)? {
                println!("{}", serde_json::to_string(&k).unwrap_or_default());
            }
        }
        KeyCmd::Revoke { id } => match store.revoke_key(id).await.map_err(db)? {
            Some(hash) => {
                eprintln!("revoked {id}");
                announce_key(cfg, &hash).await;
            }
            None => return Err(format!("no key with id {id}")),
        },
        KeyCmd::Restrict { id, restrictions } => {
            let restrictions = parse_restrictions(restrictions)?;
            match store
                .set_key_restrictions(id, &restrictions)
                .await
                .map_err(db)?
            {
                Some(hash) => {
                    eprintln!("restrictions of {id} replaced");
                    announce_key(cfg, &hash).await;
                }
                None => return Err(format!("no active key with id {id}")),
            }
        }
    }
    Ok(())
}

/// Running instances drop the tenant's cached keys at once (clustered); otherwise they see
/// the change within `auth.key_cache_ttl_ms`.
async fn announce_tenant(cfg: &crate::config::Loaded, tenant: &str) {
    if let Some(url) = &cfg.cluster_redis {
        if let Err(e) = crate::cluster::publish_tenant_changed(url.expose(), tenant).await {
            eprintln!("warning: change not announced ({e}); instances notice within auth.key_cache_ttl_ms");
        }
    }
}

/// A point in time given on the command line, or `none` (cleared).
#[derive(Debug, Clone, Copy)]
pub struct When(Option<i64>);

fn parse_when(s: &str) -> Result<When, String> {
    if s.eq_ignore_ascii_case("none") {
        return Ok(When(None));
    }
    if let Ok(secs) = s.parse::<i64>() {
        return Ok(When(Some(secs)));
    }
    let t = humantime::parse_rfc3339_weak(s)
        .map_err(|e| format!("expected RFC 3339 time, unix seconds or none: {e}"))?;
    let secs = match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    };
    Ok(When(Some(secs)))
}
