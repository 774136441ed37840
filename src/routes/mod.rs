//! The route table: `plugins/*.yaml` manifests → validated [`Route`]s → a compiled [`Matcher`].

pub mod matcher;
pub mod spec;

use crate::config::ConfigError;
use crate::errors::Envelope;
use matcher::{parse_pattern, Matcher, Seg};
use spec::{
    ChannelTraits, ChannelTransport, CorsPolicy, Credential, HandlerKind, HttpMethod, Manifest,
};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The surfaces the product has; each has exactly one manifest.
pub const SURFACES: &[&str] = &[
    "admin", "base", "console", "docs", "eth", "polygon", "sol", "streams",
];

/// One route with every default resolved: what the edge needs per request.
#[derive(Debug)]
pub struct Route {
    pub name: String,
    pub surface: String,
    pub methods: Vec<HttpMethod>,
    pub path: String,
    pub segments: Vec<Seg>,
    pub param_names: Vec<String>,
    pub handler: HandlerKind,
    /// What the route table knows of the route's channel (`HandlerKind::Channel`).
    pub channel: Option<ChannelTraits>,
    pub credential: Credential,
    /// Lowest admitted plan, as its rank in the configured plan order.
    pub min_plan: Option<usize>,
    pub min_plan_name: Option<String>,
    pub scopes: Vec<String>,
    pub features: Vec<String>,
    pub rate: Option<String>,
    pub pool: Option<String>,
    pub envelope: Envelope,
    pub cors: CorsPolicy,
    pub websocket: bool,
    pub switch: Option<String>,
    pub enabled: bool,
    /// Precomputed `Allow` header value.
    pub allow: String,
}

impl Route {
    /// The pattern ends in `{*tail}`: its handler checks the rest of the path itself.
    pub fn has_tail(&self) -> bool {
        matches!(self.segments.last(), Some(matcher::Seg::Tail(_)))
    }

    /// The pool a passthrough route or channel talks to (`None`: the route talks to no
    /// node directly).
    pub fn passthrough_pool(&self) -> Option<&str> {
        match (self.handler, self.channel) {
            (HandlerKind::Passthrough, _) => self.pool.as_deref(),
            (HandlerKind::Channel(_), Some(c))
                if c.transport != ChannelTransport::PushWebSocket =>
            {
                c.pool.or(self.pool.as_deref())
            }
            _ => None,
        }
    }

    /// A channel whose WebSocket frames go to a node as they are (Pingora's to serve).
    pub fn proxies_websocket(&self) -> bool {
        self.channel
            .is_some_and(|c| c.transport == ChannelTransport::ProxyWebSocket)
    }

    /// Path segments before the `{*tail}` (all of them for a route without one).
    pub fn segments_before_tail(&self) -> usize {
        self.segments.len() - usize::from(self.has_tail())
    }

    pub fn param<'a>(&self, params: &'a [String], name: &str) -> Option<&'a str> {
        let i = self.param_names.iter().position(|n| n == name)?;
        params.get(i).map(String::as_str)
    }
}

/// What manifests may refer to, taken from the app config.
pub struct RouteContext<'a> {
    pub plans: &'a [String],
    /// The local handlers' names, in registry order (`handlers::registry::names`).
    pub handlers: &'a [&'a str],
    /// The channels, in registry order (`handlers::channels::traits`).
    pub channels: &'a [ChannelTraits],
    pub pools: &'a [&'a str],
    pub switches: &'a [&'a str],
    /// An edge deployment: `edge_only` routes (the Base page and `/rpc/base` upgrades)
    /// exist. At the origin they do not, so a non-POST `/rpc/base` is 405 `Allow: POST`.
    pub base_edge: bool,
}

/// Load and compile every manifest in `dir`. All problems are collected, each naming
/// file, key and reason.
pub fn load(dir: &Path, ctx: &RouteContext) -> Result<Matcher, Vec<ConfigError>> {
    let mut errors = Vec::new();
    let mut routes: Vec<Arc<Route>> = Vec::new();
    let mut origin: Vec<(String, usize)> = Vec::new(); // (file, index in file) per route
    let mut names = HashSet::new();
    let mut seen_surfaces = HashSet::new();
    for file in manifest_files(dir)? {
        let Some(manifest) = read_manifest(&file, &mut errors) else {
            continue;
        };
        seen_surfaces.insert(manifest.surface.clone());
        let defaults = Defaults {
            surface: &manifest.surface,
            envelope: manifest.envelope,
            cors: manifest.cors,
            credential: manifest.credential,
        };
        for (i, spec) in manifest.routes.into_iter().enumerate() {
            let mut bad = |k: &str, reason: String| {
                errors.push(ConfigError::new(&file, &format!("routes[{i}].{k}"), reason))
            };
            if !names.insert(spec.name.clone()) {
                bad("name", format!("route name '{}' is used twice", spec.name));
            }
            if let Some(route) = route_of(spec, &defaults, ctx, &mut bad) {
                origin.push((file.display().to_string(), i));
                routes.push(Arc::new(route));
            }
        }
    }
    for s in SURFACES {
        if !seen_surfaces.contains(*s) {
            errors.push(ConfigError::new(
                dir,
                "",
                format!("missing manifest for surface '{s}' ({s}.yaml)"),
            ));
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    Matcher::build(routes.clone()).map_err(|overlaps| {
        overlaps
            .into_iter()
            .map(|(a, b, m)| {
                let (fa, ia) = &origin[a];
                let (fb, ib) = &origin[b];
                ConfigError::new(
                    Path::new(fa),
                    &format!("routes[{ia}].path"),
                    format!(
                        "route '{}' ({} {}) overlaps route '{}' ({fb} routes[{ib}])",
                        routes[a].name,
                        m.as_str(),
                        routes[a].path,
                        routes[b].name
                    ),
                )
            })
            .collect()
    })
}

/// The manifests of `dir` (`*.yaml`, `*.yml`), in name order.
fn manifest_files(dir: &Path) -> Result<Vec<PathBuf>, Vec<ConfigError>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| {
            vec![ConfigError::new(
                dir,
                "",
                format!("cannot read plugins directory: {e}"),
            )]
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    Ok(files)
}

/// One manifest, its surface checked against its file name and the known surfaces.
fn read_manifest(file: &Path, errors: &mut Vec<ConfigError>) -> Option<Manifest> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| errors.push(ConfigError::new(file, "", format!("cannot read: {e}"))))
        .ok()?;
    let manifest: Manifest = crate::config::parse_yaml(&text)
        .map_err(|(key, reason)| errors.push(ConfigError::new(file, &key, reason)))
        .ok()?;
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if manifest.surface != stem {
        errors.push(ConfigError::new(
            file,
            "surface",
            format!(
                "surface '{}' must match the file name '{stem}'",
                manifest.surface
            ),
        ));
    }
    if !SURFACES.contains(&manifest.surface.as_str()) {
        errors.push(ConfigError::new(
            file,
            "surface",
            format!(
                "unknown surface '{}'; expected one of {SURFACES:?}",
                manifest.surface
            ),
        ));
    }
    Some(manifest)
}

/// What a manifest sets for each of its routes.
struct Defaults<'a> {
    surface: &'a str,
    envelope: Envelope,
    cors: CorsPolicy,
    credential: Credential,
}

/// One route with every default resolved, its problems reported on `bad`; `None` when
/// its path does not parse or it only exists at the edge (`edge_only`, origin mode).
fn route_of(
    spec: spec::RouteSpec,
    defaults: &Defaults,
    ctx: &RouteContext,
    bad: &mut dyn FnMut(&str, String),
) -> Option<Route> {
    let Some(handler) = HandlerKind::resolve(&spec.handler, ctx.channels, ctx.handlers) else {
        bad(
            "handler",
            format!(
                "unknown handler '{}': neither a transport, a channel nor a handler this binary has",
                spec.handler
            ),
        );
        return None;
    };
    let segments = match parse_pattern(&spec.path) {
        Ok(s) => s,
        Err(reason) => {
            bad("path", format!("'{}': {reason}", spec.path));
            return None;
        }
    };
    if spec.methods.is_empty() && !spec.websocket {
        bad("methods", "at least one method is required".into());
    }
    let min_plan = check_policy(&spec, handler, ctx, bad);
    let param_names = segments
        .iter()
        .filter_map(|s| match s {
            Seg::Param(n) | Seg::Tail(n) => Some(n.clone()),
            Seg::Lit(_) => None,
        })
        .collect();
    if spec.edge_only && !ctx.base_edge {
        return None;
    }
    let mut methods = spec.methods.clone();
    methods.sort();
    methods.dedup();
    let allow = methods
        .iter()
        .map(|m| m.as_str())
        .collect::<Vec<_>>()
        .join(", ");
    Some(Route {
        name: spec.name,
        surface: defaults.surface.to_string(),
        methods,
        path: spec.path,
        segments,
        param_names,
        handler,
        channel: match handler {
            HandlerKind::Channel(i) => ctx.channels.get(usize::from(i)).copied(),
            _ => None,
        },
        credential: spec.credential.unwrap_or(defaults.credential),
        min_plan,
        min_plan_name: spec.tier,
        scopes: spec.scopes,
        features: spec.features,
        rate: spec.rate,
        pool: spec.pool,
        envelope: spec.envelope.unwrap_or(defaults.envelope),
        cors: spec.cors.unwrap_or(defaults.cors),
        websocket: spec.websocket,
        switch: spec.switch,
        enabled: spec.enabled,
        allow,
    })
}

/// The route's policy against what the configuration has: its tier (the plan's rank),
/// pool and switch; the MEV-Share stream's one-plan rule; a passthrough's pool.
fn check_policy(
    spec: &spec::RouteSpec,
    handler: HandlerKind,
    ctx: &RouteContext,
    bad: &mut dyn FnMut(&str, String),
) -> Option<usize> {
    let min_plan = match &spec.tier {
        Some(t) => match ctx.plans.iter().position(|p| p == t) {
            Some(rank) => Some(rank),
            None => {
                bad(
                    "tier",
                    format!("unknown plan '{t}'; plans are {:?}", ctx.plans),
                );
                None
            }
        },
        None => None,
    };
    let channel = match handler {
        HandlerKind::Channel(i) => ctx.channels.get(usize::from(i)),
        _ => None,
    };
    // SPEC: the MEV-Share stream is "Scale plan only", while a route's tier means
    // "this plan and above": that holds only while its plan is the highest.
    if let Some(c) = channel.filter(|c| c.one_plan) {
        if let Some(rank) = min_plan.filter(|r| r + 1 < ctx.plans.len()) {
            bad(
                "tier",
                format!(
                    "{} is for one plan only (SPEC), so its tier must be the highest plan; plans above '{}': {:?}",
                    c.title,
                    ctx.plans[rank],
                    &ctx.plans[rank + 1..]
                ),
            );
        }
    }
    if let Some(p) = &spec.pool {
        if !ctx.pools.contains(&p.as_str()) {
            bad(
                "pool",
                format!("unknown pool '{p}'; pools are {:?}", ctx.pools),
            );
        }
    }
    let needs_pool = handler == HandlerKind::Passthrough || channel.is_some_and(|c| c.needs_pool);
    if needs_pool && spec.pool.is_none() {
        bad(
            "pool",
            "a passthrough route needs the pool it forwards to".into(),
        );
    }
    if let Some(s) = &spec.switch {
        if !ctx.switches.contains(&s.as_str()) {
            bad(
                "switch",
                format!("unknown switch '{s}'; switches are {:?}", ctx.switches),
            );
        }
    }
    min_plan
}
