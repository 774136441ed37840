//! Upstream pools: hosts with family, role and capabilities, and which to try first.
//!
//! Two signals decide the order: the background health checks (`health.rs`: available,
//! degraded, quarantined), and a passive cool-down — a host that just failed a call is
//! tried after its healthy peers for a few seconds, without waiting for the next round.

pub mod conduct;
pub mod health;
pub mod latency;
pub mod tip;

use crate::address::{plain_inet, HostAddr};
use crate::config::secrets::Secret;
use crate::config::{Loaded, MethodsConf};
use crate::upstream::Call;
use health::{HealthState, HostHealth};
use latency::LatencyHistogram;
use pingora_core::protocols::l4::socket::SocketAddr as SelectionToken;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_load_balancing::selection::{BackendIter, BackendSelection};
use pingora_load_balancing::Backend;
use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The services a host can serve on endpoints of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Service {
    /// Its `url`: JSON-RPC, a REST API (beacon, Cosmos LCD).
    #[default]
    Main,
    /// Tendermint RPC (`rpc_url`).
    Rpc,
    /// Prometheus metrics (`metrics_url`).
    Metrics,
}

pub struct Host {
    pub id: String,
    pub pool: String,
    pub family: String,
    pub role: String,
    pub capabilities: Vec<String>,
    /// Its share of the calls its pool starts (`hosts[].weight`).
    pub weight: u16,
    pub addr: HostAddr,
    pub peer: HttpPeer,
    pub headers: Vec<(String, Secret)>,
    /// Where this host's Prometheus metrics are scraped (metrics mirror).
    pub metrics: Option<(HostAddr, HttpPeer)>,
    /// Where WebSocket upgrades go when that is not `addr` (`ws_url`).
    pub ws: Option<(HostAddr, HttpPeer)>,
    /// A heimdall's Tendermint RPC when it is not `addr` (`rpc_url`).
    pub rpc: Option<(HostAddr, HttpPeer)>,
    /// Milliseconds since `epoch` until which this host is set aside.
    set_aside_until_ms: AtomicU64,
    pub health: HostHealth,
    /// How long its recent answers to calls took (the hedge delay comes from it).
    pub latency: LatencyHistogram,
    /// Hedged races lost in a row (another host answered while this one said nothing).
    races_lost: AtomicU32,
    /// Answers of this host disproved by the edge's checks, and its cordon.
    pub conduct: conduct::Conduct,
    /// A digest of the host's configuration and secrets: a reload keeps the host (its
    /// health, latency and cool-down) when this is unchanged.
    fingerprint: [u8; 32],
}

impl Host {
    /// An available host of `pool` at a local address nothing listens on, for unit
    /// tests that never send to it.
    #[cfg(test)]
    pub(crate) fn for_test(pool: &str, id: &str) -> Host {
        let addr = HostAddr::parse("http://127.0.0.1:9").expect("a test address");
        let peer = addr.peer(None).expect("a test peer");
        Host {
            id: id.to_string(),
            pool: pool.to_string(),
            family: "geth".to_string(),
            role: "full".to_string(),
            capabilities: Vec::new(),
            weight: 1,
            addr,
            peer,
            headers: Vec::new(),
            metrics: None,
            ws: None,
            rpc: None,
            set_aside_until_ms: AtomicU64::new(0),
            latency: LatencyHistogram::default(),
            races_lost: AtomicU32::new(0),
            conduct: Default::default(),
            health: HostHealth::available(),
            fingerprint: [0; 32],
        }
    }

    /// Where a request goes: the WebSocket endpoint for an upgrade when the host has one.
    pub fn endpoint(&self, upgrade: bool) -> (&HostAddr, &HttpPeer) {
        match (&self.ws, upgrade) {
            (Some((addr, peer)), true) => (addr, peer),
            _ => (&self.addr, &self.peer),
        }
    }

    /// Where a request for one of the host's services goes (its URL when the service has
    /// no endpoint of its own).
    pub fn service(&self, service: Service) -> (&HostAddr, &HttpPeer) {
        let own = match service {
            Service::Main => None,
            Service::Rpc => self.rpc.as_ref(),
            Service::Metrics => self.metrics.as_ref(),
        };
        own.map_or((&self.addr, &self.peer), |(a, p)| (a, p))
    }

    /// Every endpoint a passthrough can reach is plain HTTP over TCP (what the lean front
    /// proxies itself).
    pub fn all_plain(&self) -> bool {
        [Service::Main, Service::Rpc, Service::Metrics]
            .into_iter()
            .all(|s| plain_inet(self.service(s).1).is_some())
    }

    /// A bodiless request to `path` on this host, with the host's own headers.
    pub fn call<'a>(
        &'a self,
        method: &'static str,
        path: &'a str,
        request_id: &'a str,
    ) -> Call<'a> {
        self.call_on(Service::Main, method, path, request_id)
    }

    /// `call` on one of the host's services.
    pub fn call_on<'a>(
        &'a self,
        service: Service,
        method: &'static str,
        path: &'a str,
        request_id: &'a str,
    ) -> Call<'a> {
        let (addr, peer) = self.service(service);
        Call {
            peer,
            authority: addr.authority(),
            method,
            path,
            headers: &self.headers,
            body: None,
            content_type: None,
            request_id,
        }
    }

    /// A JSON body POSTed to the host's URL path (JSON-RPC).
    pub fn post_json<'a>(&'a self, body: &'a [u8], request_id: &'a str) -> Call<'a> {
        Call {
            body: Some(body),
            ..self.call("POST", &self.addr.path, request_id)
        }
    }

    pub fn has(&self, capability: &str) -> bool {
        self.capabilities.iter().any(|c| c == capability)
    }

    pub fn set_aside(&self) -> bool {
        // 0: never set aside, or cleared by an answer; no clock read on every call's
        // candidate list.
        let until = self.set_aside_until_ms.load(Ordering::Relaxed);
        until != 0 && now_ms() < until
    }

    /// Record a failed call: the host is tried last for the cool-down.
    pub fn record_failure(&self, reason: &str) {
        self.set_aside_until_ms
            .store(now_ms() + COOL_DOWN.as_millis() as u64, Ordering::Relaxed);
        if let Ok(mut e) = self.health.last_error.lock() {
            *e = Some(reason.to_string());
        }
    }

    pub fn record_success(&self) {
        if self.set_aside_until_ms.load(Ordering::Relaxed) != 0 {
            self.set_aside_until_ms.store(0, Ordering::Relaxed);
        }
        if self.races_lost.load(Ordering::Relaxed) != 0 {
            self.races_lost.store(0, Ordering::Relaxed);
        }
    }

    /// Another host answered a hedged call while this one said nothing. One such race
    /// is a slow answer; `RACES_LOST_TO_SET_ASIDE` in a row without any answer is a host
    /// that has stopped answering (frozen, wedged), and it goes to the back of the line
    /// as a failure would put it, before its own timeouts and the health checks say so.
    pub fn record_race_lost(&self, waited: Duration) {
        let lost = self.races_lost.fetch_add(1, Ordering::Relaxed) + 1;
        if lost >= RACES_LOST_TO_SET_ASIDE {
            self.record_failure(&format!(
                "{lost} hedged calls in a row answered elsewhere first (no answer in {} ms)",
                waited.as_millis()
            ));
        }
    }

    pub fn last_error(&self) -> Option<String> {
        self.health.last_error.lock().ok().and_then(|e| e.clone())
    }
}

const COOL_DOWN: Duration = Duration::from_secs(5);
const RACES_LOST_TO_SET_ASIDE: u32 = 3;

fn now_ms() -> u64 {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

pub struct Pool {
    pub name: String,
    /// Sorted by id.
    pub hosts: Vec<Arc<Host>>,
    /// Which host a call starts on: weighted round-robin over `hosts` by index.
    rotation: Arc<Rotation>,
    /// The served tip: the head a strict majority of the hosts checked in the last
    /// health round reached (`tip::majority_head`).
    pub head: AtomicU64,
    /// The highest head reported, and whether the majority is stuck behind it.
    pub tip: tip::TipWatch,
    pub max_lag: Option<u64>,
    /// The operator's allow/deny changes to the JSON-RPC method table.
    pub methods: Arc<MethodsConf>,
    /// A view pinned to chosen hosts (per-host RPC): used whatever their health.
    pinned: bool,
}

impl Pool {
    /// Hosts to try, in order: available ones (weighted round-robin), then degraded ones (least
    /// lag first), then those in a passive cool-down; quarantined hosts never.
    /// `capability` filters out hosts that lack it.
    pub fn candidates(&self, capability: Option<&str>) -> Vec<Arc<Host>> {
        (self.candidates_borrowed(capability).into_iter())
            .cloned()
            .collect()
    }

    /// `candidates`, borrowed from the pool: the request path's form, which writes no
    /// host's reference count (every worker thread writes those, and each write moves
    /// the count's cache line between cores).
    pub fn candidates_borrowed(&self, capability: Option<&str>) -> Vec<&Arc<Host>> {
        let n = self.hosts.len();
        if n == 0 {
            return Vec::new();
        }
        if self.pinned {
            return self.hosts.iter().collect();
        }
        let start = self.rotation.iter(&[]).next().map_or(0, token_index) % n;
        let mut available = Vec::with_capacity(n);
        let mut degraded = Vec::new();
        let mut aside = Vec::new();
        for i in 0..n {
            let h = &self.hosts[(start + i) % n];
            if capability.is_some_and(|c| !h.has(c)) {
                continue;
            }
            match h.health.state() {
                HealthState::Quarantined => continue,
                _ if h.set_aside() || h.conduct.cordoned() => aside.push(h),
                HealthState::Available => available.push(h),
                HealthState::Degraded => degraded.push(h),
            }
        }
        degraded.sort_by_key(|h| h.health.lag());
        available.extend(degraded);
        available.extend(aside);
        available
    }

    /// This pool narrowed to one host, used even when unhealthy (operators asking a
    /// specific node).
    /// A view pinned to chosen hosts (per-host RPC).
    pub fn is_pinned(&self) -> bool {
        self.pinned
    }

    pub fn pinned_to(&self, host: &Arc<Host>) -> Pool {
        Pool {
            name: self.name.clone(),
            hosts: vec![host.clone()],
            rotation: rotation(std::slice::from_ref(host)),
            head: AtomicU64::new(self.head.load(Ordering::Relaxed)),
            tip: Default::default(),
            max_lag: self.max_lag,
            methods: self.methods.clone(),
            pinned: true,
        }
    }

    pub fn host(&self, id: &str) -> Option<&Arc<Host>> {
        self.hosts.iter().find(|h| h.id == id)
    }
}

/// Which host a pool's call starts on: pingora-load-balancing's weighted round-robin
/// over one selection token per host. A token is the host's index in its pool (as the
/// token's port): the selection needs only identity and weight, and hosts are URLs
/// that may share a socket address, so their addresses cannot be the tokens.
type Rotation = pingora_load_balancing::selection::RoundRobin;

fn rotation(hosts: &[Arc<Host>]) -> Arc<Rotation> {
    let tokens: BTreeSet<Backend> = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| Backend {
            addr: SelectionToken::Inet(std::net::SocketAddr::from(([0, 0, 0, 0], i as u16))),
            weight: h.weight.max(1) as usize,
            ext: Default::default(),
        })
        .collect();
    Arc::new(Rotation::build(&tokens))
}

fn token_index(token: &Backend) -> usize {
    token.addr.as_inet().map_or(0, |a| a.port() as usize)
}

#[derive(Default)]
pub struct Pools {
    pools: HashMap<String, Arc<Pool>>,
}

impl Pools {
    pub fn from_config(cfg: &Loaded) -> Result<Self, String> {
        let mut pools = HashMap::new();
        for (name, pc) in &cfg.app.pools {
            let mut hosts = Vec::new();
            for (i, hc) in pc.hosts.iter().enumerate() {
                // Each of the host's endpoints: parsed address and Pingora peer, errors
                // naming the key.
                let secrets = cfg
                    .host_secrets
                    .get(name)
                    .and_then(|v| v.get(i))
                    .cloned()
                    .unwrap_or_default();
                let url_key = secrets.url_key.as_ref().map(|k| k.expose());
                let endpoint = |key: &str, parsed: Result<HostAddr, String>, sni: Option<&str>| {
                    let at = |e: String| format!("pools.{name}.hosts[{i}].{key}: {e}");
                    let addr = parsed.map_err(at)?.with_key(url_key);
                    let peer = addr.peer(sni).map_err(at)?;
                    Ok::<_, String>((addr, peer))
                };
                let fingerprint = {
                    let mut text = format!("{name}\n{hc:?}");
                    for (h, v) in &secrets.headers {
                        text.push_str(&format!("\n{h}: {}", v.expose()));
                    }
                    if let Some(k) = &secrets.url_key {
                        text.push_str(&format!("\nkey: {}", k.expose()));
                    }
                    crate::crypto::sha256(&text)
                };
                let sni = hc.sni.as_deref();
                let (addr, peer) = endpoint("url", HostAddr::parse(&hc.url), sni)?;
                let metrics = hc
                    .metrics_url
                    .as_deref()
                    .map(|u| endpoint("metrics_url", HostAddr::parse(u), None))
                    .transpose()?;
                let rpc = hc
                    .rpc_url
                    .as_deref()
                    .map(|u| endpoint("rpc_url", HostAddr::parse(u), sni))
                    .transpose()?;
                let ws = hc
                    .ws_url
                    .as_deref()
                    .map(|u| endpoint("ws_url", HostAddr::parse_ws(u), sni))
                    .transpose()?;
                hosts.push(Arc::new(Host {
                    id: hc.id.clone(),
                    pool: name.clone(),
                    family: hc.family.clone(),
                    role: hc.role.clone(),
                    capabilities: hc.capabilities.clone(),
                    weight: hc.weight,
                    addr,
                    peer,
                    headers: secrets.headers,
                    metrics,
                    ws,
                    rpc,
                    set_aside_until_ms: AtomicU64::new(0),
                    latency: LatencyHistogram::default(),
                    races_lost: AtomicU32::new(0),
                    conduct: Default::default(),
                    health: HostHealth::default(),
                    fingerprint,
                }));
            }
            hosts.sort_by(|a, b| a.id.cmp(&b.id));
            pools.insert(
                name.clone(),
                Arc::new(Pool {
                    name: name.clone(),
                    rotation: rotation(&hosts),
                    hosts,
                    head: AtomicU64::new(0),
                    tip: Default::default(),
                    max_lag: pc.max_lag,
                    methods: Arc::new(pc.methods.clone()),
                    pinned: false,
                }),
            );
        }
        Ok(Pools { pools })
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Pool>> {
        self.pools.get(name)
    }

    /// These pools (just built from a reloaded configuration) with `old`'s host where a
    /// host is unchanged: its health, latency and cool-down carry over, so a reload
    /// never sends traffic to a host the checks had set aside, nor waits for a round to
    /// trust one they had cleared. Pools keep the highest head seen.
    pub fn carry_over(mut self, old: &Pools) -> Pools {
        for (name, pool) in self.pools.iter_mut() {
            let Some(before) = old.get(name) else {
                continue;
            };
            let hosts: Vec<Arc<Host>> = pool
                .hosts
                .iter()
                .map(|h| {
                    before
                        .host(&h.id)
                        .filter(|o| o.fingerprint == h.fingerprint)
                        .cloned()
                        .unwrap_or_else(|| h.clone())
                })
                .collect();
            *pool = Arc::new(Pool {
                name: pool.name.clone(),
                rotation: rotation(&hosts),
                hosts,
                head: AtomicU64::new(before.head.load(Ordering::Relaxed)),
                tip: Default::default(),
                max_lag: pool.max_lag,
                methods: pool.methods.clone(),
                pinned: false,
            });
        }
        self
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<Pool>> {
        self.pools.values()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_start_on_hosts_in_proportion_to_their_weight() {
        let host = |id: &str, weight| {
            let mut h = Host::for_test("eth_el", id);
            h.weight = weight;
            Arc::new(h)
        };
        let pool = Pool {
            name: "eth_el".into(),
            rotation: rotation(&[host("a", 3), host("b", 1)]),
            hosts: vec![host("a", 3), host("b", 1)],
            head: AtomicU64::new(0),
            tip: Default::default(),
            max_lag: None,
            methods: Default::default(),
            pinned: false,
        };
        let firsts: Vec<String> = (0..8)
            .map(|_| pool.candidates(None)[0].id.clone())
            .collect();
        assert_eq!(firsts, ["a", "a", "a", "b", "a", "a", "a", "b"]);
        // Every host is still a candidate, after the first.
        assert_eq!(pool.candidates(None).len(), 2);
    }

    #[test]
    fn parses_urls_and_refuses_secrets_in_them() {
        let a = HostAddr::parse("http://127.0.0.1:8545").unwrap();
        assert_eq!(
            (a.tls, a.host.as_str(), a.port, a.path.as_str()),
            (false, "127.0.0.1", 8545, "/")
        );
        let a = HostAddr::parse("https://node.example/rpc/v1").unwrap();
        assert_eq!(
            (a.port, a.path.as_str(), a.authority()),
            (443, "/rpc/v1", "node.example")
        );
        let a = HostAddr::parse("http://[::1]:9000/x").unwrap();
        assert_eq!((a.host.as_str(), a.authority()), ("::1", "[::1]:9000"));
        assert!(HostAddr::parse("ftp://x").is_err());
        let w = HostAddr::parse_ws("ws://10.0.1.11:8546").unwrap();
        assert_eq!((w.tls, w.authority()), (false, "10.0.1.11:8546"));
        assert!(HostAddr::parse_ws("wss://node.example/ws").unwrap().tls);
        assert!(HostAddr::parse_ws("ftp://x").is_err());
        assert!(HostAddr::parse("https://user:key@x").is_err());
        assert!(HostAddr::parse("https://x/rpc?apikey=1").is_err());
        assert!(HostAddr::parse("http://x:notaport").is_err());
    }
}
