//! The floor for the benchmark: Pingora proxying every request to one upstream, with no
//! chainedge logic at all. `bare_proxy <listen> <upstream> <threads>`.
use async_trait::async_trait;
use pingora_core::server::configuration::ServerConf;
use pingora_core::server::Server;
use pingora_core::upstreams::peer::HttpPeer;
use pingora_proxy::{ProxyHttp, Session};

struct Bare(String);

#[async_trait]
impl ProxyHttp for Bare {
    type CTX = ();
    fn new_ctx(&self) {}
    async fn upstream_peer(
        &self,
        _s: &mut Session,
        _c: &mut (),
    ) -> pingora_core::Result<Box<HttpPeer>> {
        Ok(Box::new(HttpPeer::new(
            self.0.as_str(),
            false,
            String::new(),
        )))
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let conf = ServerConf {
        threads: args[3].parse().unwrap(),
        work_stealing: std::env::var("STEAL").is_ok(),
        ..Default::default()
    };
    let mut server = Server::new_with_opt_and_conf(None, conf);
    let mut svc = pingora_proxy::http_proxy_service(&server.configuration, Bare(args[2].clone()));
    svc.add_tcp(&args[1]);
    server.add_service(svc);
    server.run_forever();
}
