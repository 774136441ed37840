//! A throwaway Redis for the cluster tests: Debian's `redis-server` on a free loopback
//! port, nothing saved, stopped in `Drop`; it can be killed and started again on the
//! same port (Redis going away mid-load).

use super::free_port;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct RedisServer {
    child: Option<Child>,
    pub port: u16,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        let mut r = RedisServer {
            child: None,
            port: free_port(),
        };
        r.restart();
        r
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kill it (SIGKILL: no goodbye to clients).
    pub fn kill(&mut self) {
        self.signal("CONT");
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Send `sig` (`STOP`: a hung Redis, which neither answers nor refuses; `CONT`).
    pub fn signal(&self, sig: &str) {
        if let Some(c) = &self.child {
            let _ = Command::new("kill")
                .args([&format!("-{sig}"), &c.id().to_string()])
                .status();
        }
    }

    /// Start it (again) on the same port, empty.
    pub fn restart(&mut self) {
        self.kill();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (scripts/setup.sh installs it)");
        self.child = Some(child);
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server did not start on port {}", self.port);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
