//! `-d`: the process detaches before anything starts a thread or opens the store.
//!
//! Pingora 0.9 forks in `Server::run`, after the app has opened its store: SQLite's
//! reader threads (and any connection carried across a fork) would not survive it, and
//! every store call of a daemonized edge would time out. So the edge detaches here, as
//! Pingora would (pid file, working directory, user and group, stderr to `error_log`),
//! and hands Pingora a configuration that does not fork again. stdout (the access log)
//! is always kept: under systemd it is the journal.

use pingora_core::server::configuration::{Opt, ServerConf};

/// Detach when `-d` or `daemon: true` asks for it; afterwards neither asks again.
pub fn detach_if_asked(opt: &mut Opt, conf: &mut ServerConf) -> Result<(), String> {
    if !(opt.daemon || conf.daemon) {
        return Ok(());
    }
    opt.daemon = false;
    conf.daemon = false;
    // The running process (an upgrade's old one) holds its pid file locked: move it
    // aside, as Pingora does, so this one can take the name.
    let pid_file = std::path::Path::new(&conf.pid_file);
    if pid_file.exists() {
        let _ = std::fs::rename(pid_file, format!("{}.old", conf.pid_file));
    }
    // Files the daemon creates (store, journal, pid file) are the service's alone.
    let mut d = daemonix::Daemonize::new()
        .umask(0o077)
        .pid_file(&conf.pid_file)
        .stdout(daemonix::Stdio::keep());
    if let Some(dir) = &conf.working_directory {
        d = d.working_directory(dir);
    }
    d = match &conf.error_log {
        Some(path) => {
            let log = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(path)
                .map_err(|e| format!("error_log {path}: {e}"))?;
            d.stderr(log)
        }
        None => d.stderr(daemonix::Stdio::keep()),
    };
    if let Some(user) = &conf.user {
        d = d.user(user.as_str());
    }
    if let Some(group) = &conf.group {
        d = d.group(group.as_str());
    }
    d.start().map_err(|e| format!("daemonize: {e}"))
}
