//! Opening a node's event stream on the first host that gives it: the one opener behind
//! the shared beacon event streams (`events`) and the MEV-Share stream.

use crate::config::secrets::Secret;
use crate::pools::Host;
use crate::upstream::UpstreamClient;
use pingora_core::protocols::http::client::HttpSession;
use std::sync::Arc;
use std::time::Duration;

/// What an event stream is asked of a node.
pub struct StreamAsk<'a> {
    /// Path and query under each host's base path; empty: the base path itself.
    pub rest: &'a str,
    /// Sent as `Last-Event-ID` (a stream resumed where the last node left it).
    pub last_event_id: Option<&'a str>,
    pub request_id: &'a str,
    /// How long each host has to answer with its head.
    pub timeout: Duration,
    /// The stream's name in a failed host's health record (`events`, `mev-share`).
    pub what: &'a str,
}

/// The first of `hosts`, in order, that answers 200, with its open stream. A host that
/// cannot be reached has its failure recorded; one that answers another status is
/// passed over. `Err`: what the last host said.
pub async fn open_first(
    client: &UpstreamClient,
    hosts: &[Arc<Host>],
    ask: &StreamAsk<'_>,
) -> Result<(Arc<Host>, HttpSession), String> {
    let mut last = String::from("no host to ask");
    for host in hosts {
        let path = match ask.rest {
            "" => host.addr.path.clone(),
            rest => format!("{}/{}", host.addr.path.trim_end_matches('/'), rest),
        };
        let resumed: Vec<(String, Secret)>;
        let mut call = host.call("GET", &path, ask.request_id);
        if let Some(id) = ask.last_event_id {
            let mut headers = host.headers.clone();
            headers.push(("Last-Event-ID".to_string(), Secret::not_secret(id)));
            resumed = headers;
            call.headers = &resumed;
        }
        match client.open(call, ask.timeout).await {
            Ok((200, session)) => return Ok((host.clone(), session)),
            Ok((status, _)) => last = format!("{}: HTTP {status}", host.id),
            Err(e) => {
                host.record_failure(&format!("{}: {e}", ask.what));
                last = format!("{}: {e}", host.id);
            }
        }
    }
    Err(last)
}
