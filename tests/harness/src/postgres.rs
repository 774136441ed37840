//! A throwaway PostgreSQL server for the store's tests: Debian's `postgresql` binaries,
//! `initdb` into a temporary directory, on a free loopback port, stopped and removed in
//! `Drop`. PostgreSQL refuses to run as root, so under root it runs as `postgres`.

use super::{free_port, tempdir};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct PgServer {
    child: Option<Child>,
    dir: PathBuf,
    pub port: u16,
}

/// The newest installed PostgreSQL's `bin` directory.
fn pg_bin() -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is not installed (scripts/setup.sh installs it)")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|d| d.join("initdb").exists())
        .collect();
    dirs.sort();
    dirs.pop().expect("no PostgreSQL with initdb")
}

/// Run as the `postgres` user when we are root (uid/gid of that account).
fn as_postgres(cmd: &mut Command) -> &mut Command {
    let root = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false);
    if root {
        let (uid, gid) = postgres_ids();
        cmd.uid(uid).gid(gid);
    }
    cmd
}

fn postgres_ids() -> (u32, u32) {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    let line = passwd
        .lines()
        .find(|l| l.starts_with("postgres:"))
        .expect("no postgres user");
    let f: Vec<&str> = line.split(':').collect();
    (f[2].parse().unwrap(), f[3].parse().unwrap())
}

impl PgServer {
    pub fn start() -> PgServer {
        let bin = pg_bin();
        let dir = tempdir("pg");
        let (uid, gid) = postgres_ids();
        let _ = std::os::unix::fs::chown(&dir, Some(uid), Some(gid));
        let data = dir.join("data");
        let out = as_postgres(Command::new(bin.join("initdb")).args([
            "-D",
            data.to_str().unwrap(),
            "-A",
            "trust",
            "-U",
            "postgres",
            "-E",
            "UTF8",
            "--no-sync",
        ]))
        .stdout(Stdio::null())
        .output()
        .expect("initdb");
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut server = PgServer {
            child: None,
            dir,
            port: free_port(),
        };
        server.restart();
        server
    }

    /// Start the server (again) on its data directory and port.
    pub fn restart(&mut self) {
        self.stop();
        let data = self.dir.join("data");
        let child = as_postgres(Command::new(pg_bin().join("postgres")).args([
            "-D",
            data.to_str().unwrap(),
            "-p",
            &self.port.to_string(),
            "-k",
            self.dir.to_str().unwrap(),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            "fsync=off",
            "-c",
            "max_connections=200",
        ]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("postgres");
        self.child = Some(child);
        self.wait_ready();
    }

    /// Send `sig` (`STOP`, `CONT`) to the server and every process it started (each
    /// connection's backend): `STOP` is a hung database, not a refusing one.
    pub fn signal(&self, sig: &str) {
        let Some(child) = &self.child else {
            return;
        };
        let pid = child.id().to_string();
        let _ = Command::new("kill")
            .args([&format!("-{sig}"), &pid])
            .status();
        let _ = Command::new("pkill")
            .args([&format!("-{sig}"), "-P", &pid])
            .status();
    }

    /// Stop the server (fast shutdown: open connections are cut).
    pub fn stop(&mut self) {
        // A frozen server (a test that failed mid-freeze) must run to shut down.
        self.signal("CONT");
        let Some(mut child) = self.child.take() else {
            return;
        };
        // SIGINT: PostgreSQL's fast shutdown.
        let _ = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status();
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    fn wait_ready(&self) {
        let until = Instant::now() + Duration::from_secs(30);
        let bin = pg_bin();
        while Instant::now() < until {
            let ready = Command::new(bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .is_ok_and(|s| s.success());
            if ready {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("postgres did not start on port {}", self.port);
    }

    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// A fresh, empty database: its URL.
    pub fn create_db(&self) -> String {
        let name = format!("t_{}", super::rand_suffix());
        let out = Command::new(pg_bin().join("psql"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-q",
                "-c",
                &format!("CREATE DATABASE {name}"),
            ])
            .output()
            .expect("psql");
        assert!(
            out.status.success(),
            "create database: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.url(&name)
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
