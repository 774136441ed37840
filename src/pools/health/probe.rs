//! Probing one host with its own protocol: what it is asked (by its client family) and
//! what a good answer says (its head, whether it is syncing).

use super::super::{Host, Service};
use crate::jsonrpc::{Id, Payload, Request, Response};
use crate::upstream::{UpstreamClient, UpstreamResponse};
use bytes::Bytes;
use serde_json::{json, Value};
use std::time::Duration;

/// How a host is probed, from its client family.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ProbeKind {
    Execution,
    Beacon,
    Solana,
    /// A Jito-style block engine: its JSON-RPC answers `getTipAccounts`.
    BlockEngine,
    Heimdall,
    Relay,
    AnyHttp,
}

impl ProbeKind {
    pub fn for_family(family: &str) -> ProbeKind {
        match family {
            f if f.starts_with("el-") || f == "bor" => ProbeKind::Execution,
            f if f.starts_with("cl-") => ProbeKind::Beacon,
            "solana" => ProbeKind::Solana,
            "block-engine" => ProbeKind::BlockEngine,
            "heimdall" => ProbeKind::Heimdall,
            "relay" => ProbeKind::Relay,
            _ => ProbeKind::AnyHttp,
        }
    }

    /// Default blocks/slots behind the pool head before a host is degraded.
    pub fn default_max_lag(self) -> u64 {
        match self {
            ProbeKind::Beacon => 3,
            ProbeKind::Solana => 50,
            _ => 5,
        }
    }
}

/// A good check: the host's head (when its protocol has one) and whether it is syncing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observation {
    pub head: Option<u64>,
    pub syncing: bool,
}

impl Observation {
    pub(super) fn at(head: u64) -> Self {
        Observation {
            head: Some(head),
            syncing: false,
        }
    }
}

/// Probe one host with its own protocol.
pub async fn probe(
    client: &UpstreamClient,
    host: &Host,
    timeout: Duration,
) -> Result<Observation, String> {
    let p = Prober {
        client,
        host,
        timeout,
    };
    let base = host.addr.path.trim_end_matches('/');
    // A host that only answers (no head to follow).
    let answers = Observation::default();
    match ProbeKind::for_family(&host.family) {
        ProbeKind::Execution => p.execution().await,
        ProbeKind::Solana => p.solana().await,
        ProbeKind::BlockEngine => {
            let call = Request::new(Id::index(1), "getTipAccounts", json!([]));
            let accounts = result_by_id(&p.post(vec![call]).await?, 1)?.is_array();
            accounts
                .then_some(answers)
                .ok_or_else(|| "getTipAccounts: not a list".into())
        }
        ProbeKind::Beacon => p.beacon(base).await,
        ProbeKind::Heimdall => p.heimdall().await,
        ProbeKind::Relay => {
            let r = p.get(format!("{base}/eth/v1/builder/status")).await?;
            if r.status != 200 {
                return Err(format!("HTTP {}", r.status));
            }
            Ok(answers)
        }
        ProbeKind::AnyHttp => {
            let r = p.get(format!("{base}/")).await?;
            if r.status >= 500 {
                return Err(format!("HTTP {}", r.status));
            }
            Ok(answers)
        }
    }
}

/// The probes of hosts that follow a chain: its head, and whether it is syncing.
impl Prober<'_> {
    /// An execution client: `eth_blockNumber` and `eth_syncing` in one batch.
    async fn execution(&self) -> Result<Observation, String> {
        let v = self
            .post(vec![
                Request::new(Id::index(1), "eth_blockNumber", json!([])),
                Request::new(Id::index(2), "eth_syncing", json!([])),
            ])
            .await?;
        let head = result_by_id(&v, 1)?
            .as_str()
            .and_then(parse_hex)
            .ok_or("eth_blockNumber: not a hex quantity")?;
        let syncing = !matches!(result_by_id(&v, 2)?, Value::Bool(false));
        Ok(Observation {
            syncing,
            ..Observation::at(head)
        })
    }

    /// A Solana RPC node: `getHealth` and `getSlot` in one batch.
    async fn solana(&self) -> Result<Observation, String> {
        let v = self
            .post(vec![
                Request::new(Id::index(1), "getHealth", json!([])),
                Request::new(Id::index(2), "getSlot", json!([])),
            ])
            .await?;
        let healthy = result_by_id(&v, 1).is_ok_and(|r| r == "ok");
        let slot = result_by_id(&v, 2)?
            .as_u64()
            .ok_or("getSlot: not a number")?;
        Ok(Observation {
            syncing: !healthy,
            ..Observation::at(slot)
        })
    }

    /// A beacon node: `/eth/v1/node/syncing` under its base path.
    async fn beacon(&self, base: &str) -> Result<Observation, String> {
        let v = self
            .json(Service::Main, format!("{base}/eth/v1/node/syncing"))
            .await?;
        let head = v["data"]["head_slot"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or("syncing: no data.head_slot")?;
        Ok(Observation {
            syncing: v["data"]["is_syncing"].as_bool().unwrap_or(false),
            ..Observation::at(head)
        })
    }

    /// Heimdall: Tendermint RPC's `/status`, on its own port when the host has `rpc_url`.
    async fn heimdall(&self) -> Result<Observation, String> {
        let (rpc, _) = self.host.service(Service::Rpc);
        let path = format!("{}/status", rpc.path.trim_end_matches('/'));
        let v = self.json(Service::Rpc, path).await?;
        let info = &v["result"]["sync_info"];
        let head = info["latest_block_height"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .ok_or("status: no latest_block_height")?;
        Ok(Observation {
            syncing: info["catching_up"].as_bool().unwrap_or(false),
            ..Observation::at(head)
        })
    }
}

/// One host's health-check calls, each bounded by the check's timeout and 1 MiB.
struct Prober<'a> {
    client: &'a UpstreamClient,
    host: &'a Host,
    timeout: Duration,
}

const PROBE_ID: &str = "chainedge-health-check";

impl Prober<'_> {
    async fn get(&self, path: String) -> Result<UpstreamResponse, String> {
        self.client
            .send(
                self.host.call("GET", &path, PROBE_ID),
                self.timeout,
                1 << 20,
            )
            .await
            .map_err(|e| e.to_string())
    }

    /// A GET on one of the host's services whose answer must be 200 and JSON.
    async fn json(&self, service: Service, path: String) -> Result<Value, String> {
        let r = self
            .client
            .send(
                self.host.call_on(service, "GET", &path, PROBE_ID),
                self.timeout,
                1 << 20,
            )
            .await
            .map_err(|e| e.to_string())?;
        if r.status != 200 {
            return Err(format!("HTTP {}", r.status));
        }
        serde_json::from_slice(&r.body).map_err(|e| format!("bad JSON: {e}"))
    }

    /// A JSON-RPC batch.
    async fn post(&self, calls: Vec<Request>) -> Result<Vec<Response>, String> {
        let body = Bytes::from(serde_json::to_vec(&calls).unwrap_or_default());
        let r = self
            .client
            .send(self.host.post_json(&body, PROBE_ID), self.timeout, 1 << 20)
            .await
            .map_err(|e| e.to_string())?;
        if r.status != 200 {
            return Err(format!("HTTP {}", r.status));
        }
        serde_json::from_slice::<Vec<Response>>(&r.body)
            .map_err(|e| format!("not a JSON-RPC batch answer: {e}"))
    }
}

fn result_by_id(batch: &[Response], id: usize) -> Result<&Value, String> {
    let item = batch
        .iter()
        .find(|a| a.id.as_index() == Some(id))
        .ok_or_else(|| format!("no answer for call {id}"))?;
    match &item.payload {
        Payload::Result(v) => Ok(v),
        Payload::Error(e) => Err(format!("error {} {}", e.code, e.message)),
    }
}

fn parse_hex(s: &str) -> Option<u64> {
    u64::from_str_radix(s.strip_prefix("0x")?, 16).ok()
}
