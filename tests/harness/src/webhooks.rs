//! A real HTTPS webhook receiver on 127.0.0.1 (its own certificate for `localhost`),
//! recording what it is sent, and the check of a delivery's signature.

use hmac::{Hmac, Mac};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A certificate for `localhost` (its own CA) in `dir`.
pub fn localhost_cert(dir: &Path) {
    super::cert_for(dir, "localhost", "DNS:localhost,IP:127.0.0.1");
}

/// One request a receiver got.
#[derive(Debug, Clone)]
pub struct Hit {
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Hit {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// An HTTPS webhook receiver on 127.0.0.1 answering every request with `status` (and a
/// `Location` to the cloud metadata address for a 3xx).
pub struct Receiver {
    pub port: u16,
    hits: Arc<Mutex<Vec<Hit>>>,
    status: Arc<AtomicU16>,
}

impl Receiver {
    pub fn start(dir: &Path, status: u16) -> Receiver {
        use openssl::ssl::{SslAcceptor, SslFiletype, SslMethod};
        let mut b = SslAcceptor::mozilla_intermediate(SslMethod::tls()).unwrap();
        b.set_private_key_file(dir.join("key.pem"), SslFiletype::PEM)
            .unwrap();
        b.set_certificate_chain_file(dir.join("cert.pem")).unwrap();
        let acceptor = Arc::new(b.build());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(Mutex::new(Vec::new()));
        let seen = hits.clone();
        let answering = Arc::new(AtomicU16::new(status));
        let current = answering.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let acceptor = acceptor.clone();
                let seen = seen.clone();
                let current = current.clone();
                std::thread::spawn(move || {
                    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
                    let Ok(tls) = acceptor.accept(stream) else {
                        return;
                    };
                    let mut r = BufReader::new(tls);
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let mut headers = Vec::new();
                        let mut len = 0;
                        loop {
                            let mut h = String::new();
                            if r.read_line(&mut h).unwrap_or(0) == 0 {
                                return;
                            }
                            let h = h.trim_end().to_string();
                            if h.is_empty() {
                                break;
                            }
                            if let Some((n, v)) = h.split_once(':') {
                                if n.eq_ignore_ascii_case("content-length") {
                                    len = v.trim().parse().unwrap_or(0);
                                }
                                headers.push((n.trim().to_string(), v.trim().to_string()));
                            }
                        }
                        let mut body = vec![0; len];
                        if r.read_exact(&mut body).is_err() {
                            return;
                        }
                        seen.lock().unwrap().push(Hit {
                            headers,
                            body: String::from_utf8_lossy(&body).into_owned(),
                        });
                        let status = current.load(Ordering::SeqCst);
                        let extra = if (300..400).contains(&status) {
                            "Location: http://169.254.169.254/latest/meta-data\r\n"
                        } else {
                            ""
                        };
                        let answer =
                            format!("HTTP/1.1 {status} X\r\n{extra}Content-Length: 2\r\n\r\nok");
                        if r.get_mut().write_all(answer.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        Receiver {
            port,
            hits,
            status: answering,
        }
    }

    /// Answer every request from now on with `status`.
    pub fn answer(&self, status: u16) {
        self.status.store(status, Ordering::SeqCst);
    }

    pub fn url(&self) -> String {
        format!("https://localhost:{}/hook", self.port)
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }
}

/// Check a delivery's `X-Chainedge-Signature` against the entry's secret.
pub fn verify(secret: &str, hit: &Hit) {
    let ts = hit.header("X-Chainedge-Timestamp").expect("timestamp");
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{ts}.{}", hit.body).as_bytes());
    let want = format!("v1={}", hex::encode(mac.finalize().into_bytes()));
    assert_eq!(hit.header("X-Chainedge-Signature"), Some(want.as_str()));
}
