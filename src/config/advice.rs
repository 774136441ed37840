//! Advice on a configuration that loads but is likely not what its operator meant:
//! printed by `chainedge -t` and logged at start, never a reason to refuse.

use super::Loaded;
use std::net::SocketAddr;

impl Loaded {
    /// One sentence per setting worth a second look.
    pub fn advice(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.loopback_admin_facing_the_network(&mut out);
        out
    }

    /// Loopback admin with a listener that faces the network: a local TCP proxy in front
    /// of it makes every client it carries look like loopback.
    fn loopback_admin_facing_the_network(&self, out: &mut Vec<String>) {
        let app = &self.app;
        if !app.admin.allow_loopback {
            return;
        }
        // Admin routes are served on their own listener only, when it has one.
        let facing: Vec<(String, String)> = match self.admin_listen {
            Some(a) if !a.ip().is_loopback() => vec![("admin.listen".into(), a.to_string())],
            Some(_) => Vec::new(),
            None => {
                let http = app
                    .listen
                    .http
                    .iter()
                    .enumerate()
                    .map(|(i, a)| (format!("listen.http[{i}]"), a));
                let tls = app
                    .listen
                    .tls
                    .iter()
                    .enumerate()
                    .map(|(i, t)| (format!("listen.tls[{i}]"), &t.addr));
                let proxied = app.listen.proxied();
                http.chain(tls)
                    .filter(|(_, a)| {
                        a.parse::<SocketAddr>()
                            .is_ok_and(|s| !s.ip().is_loopback() && !proxied.contains(&s))
                    })
                    .map(|(k, a)| (k, a.clone()))
                    .collect()
            }
        };
        for (key, addr) in facing {
            out.push(format!(
                "admin.allow_loopback is on while {key} ({addr}) faces the network: any process \
                 on this host, and every client of a local TCP proxy (haproxy `mode tcp`, nginx \
                 `stream`) in front of it, is admin without a token. Set admin.allow_loopback: \
                 false and use admin.token, or have such a proxy send the PROXY protocol \
                 (listen.proxy_protocol). See docs/security.md#admin"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::config::{load, Purpose};

    fn advice(listen: &str, admin: &str) -> Vec<String> {
        let dir = std::env::temp_dir().join(format!("chainedge-advice-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(format!("app-{}.yaml", listen.len() + admin.len()));
        let plugins = concat!(env!("CARGO_MANIFEST_DIR"), "/plugins");
        std::fs::write(
            &path,
            format!(
                "plugins: {plugins}\nlisten:\n{listen}metrics:\n  listen: \"127.0.0.1:9090\"\n\
                 store:\n  path: {}\nplans: [free, basic, pro, business, enterprise, scale]\nadmin:\n{admin}",
                dir.join("store.db").display()
            ),
        )
        .unwrap();
        let loaded = load(&path, Purpose::Operate).expect("loads");
        loaded.advice()
    }

    #[test]
    fn loopback_admin_is_questioned_only_where_a_listener_faces_the_network() {
        let facing = advice("  http: [\"0.0.0.0:8080\"]\n", "  allow_loopback: true\n");
        assert_eq!(facing.len(), 1, "{facing:?}");
        assert!(
            facing[0].contains("listen.http[0] (0.0.0.0:8080)"),
            "{}",
            facing[0]
        );
        let off = advice("  http: [\"0.0.0.0:8080\"]\n", "  allow_loopback: false\n");
        assert!(off.is_empty(), "{off:?}");
        let local = advice("  http: [\"127.0.0.1:8080\"]\n", "  allow_loopback: true\n");
        assert!(local.is_empty(), "{local:?}");
        let proxied = advice(
            "  http: [\"0.0.0.0:8080\"]\n  proxy_protocol: [\"0.0.0.0:8080\"]\n",
            "  allow_loopback: true\n",
        );
        assert!(proxied.is_empty(), "{proxied:?}");
        let apart = advice(
            "  http: [\"0.0.0.0:8080\"]\n",
            "  allow_loopback: true\n  listen: \"127.0.0.1:9099\"\n",
        );
        assert!(apart.is_empty(), "{apart:?}");
    }
}
