//! Pingora's own server YAML, loaded strictly: Pingora ignores unknown keys, we refuse them.
//!
//! One default differs from Pingora's: `work_stealing` is off unless the file turns it on.
//! Each worker thread then runs its own event loop over the connections it accepted, as
//! nginx workers do. With stealing on, a woken connection task often wakes the other
//! worker, answers leave one at a time, and on the 2-core bench machine the load
//! generator woke 1.4 times per request instead of 0.4 (nginx) and throughput fell 10-15%
//! (bench/RESULTS.md). Blocking work (SQLite, SMTP) runs on the blocking pool either way.

use super::ConfigError;
use pingora_core::server::configuration::ServerConf;
use std::path::Path;

pub fn load(path: &Path) -> Result<ServerConf, ConfigError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| ConfigError::new(path, "", format!("cannot read: {e}")))?;
    let value: serde_yaml::Value =
        serde_yaml::from_str(&text).map_err(|e| ConfigError::new(path, "", e.to_string()))?;
    let known = known_keys();
    if let serde_yaml::Value::Mapping(map) = &value {
        for key in map.keys() {
            let k = key.as_str().unwrap_or("");
            if !known.iter().any(|n| n == k) {
                return Err(ConfigError::new(
                    path,
                    k,
                    "unknown Pingora server key".to_string(),
                ));
            }
        }
    } else if !value.is_null() {
        return Err(ConfigError::new(
            path,
            "",
            "expected a mapping of Pingora server keys".into(),
        ));
    }
    let mut conf = ServerConf::from_yaml(&text)
        .map_err(|e| ConfigError::new(path, "", format!("invalid Pingora server conf: {e}")))?;
    let stealing_set =
        matches!(&value, serde_yaml::Value::Mapping(m) if m.contains_key("work_stealing"));
    if !stealing_set {
        conf.work_stealing = false;
    }
    for (key, p) in [
        ("pid_file", &conf.pid_file),
        ("upgrade_sock", &conf.upgrade_sock),
    ] {
        if !p.starts_with('/') {
            return Err(ConfigError::new(
                path,
                key,
                format!(
                    "'{p}' must be an absolute path (graceful upgrade passes it between processes)"
                ),
            ));
        }
    }
    Ok(conf)
}

/// Pingora's defaults with ours (no work stealing), for a server started without a file.
pub fn defaults() -> ServerConf {
    ServerConf {
        work_stealing: false,
        ..ServerConf::default()
    }
}

/// Every key `ServerConf` has, read off its own serialization so it tracks Pingora.
fn known_keys() -> Vec<String> {
    match serde_yaml::to_value(ServerConf::default()) {
        Ok(serde_yaml::Value::Mapping(m)) => m
            .keys()
            .filter_map(|k| k.as_str().map(String::from))
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(name: &str, text: &str) -> Result<ServerConf, ConfigError> {
        let path =
            std::env::temp_dir().join(format!("chainedge-{}-{name}.yaml", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let conf = load(&path);
        let _ = std::fs::remove_file(&path);
        conf
    }

    #[test]
    fn work_stealing_is_off_unless_the_file_turns_it_on() {
        let unset = load_text("unset", "version: 1\nthreads: 2\n").unwrap();
        assert!(!unset.work_stealing);
        assert_eq!(unset.threads, 2);
        assert!(
            load_text("on", "version: 1\nwork_stealing: true\n")
                .unwrap()
                .work_stealing
        );
        assert!(!defaults().work_stealing);
    }

    #[test]
    fn unknown_keys_and_relative_paths_are_refused() {
        assert!(load_text("unknown", "version: 1\nthreadz: 2\n").is_err());
        assert!(load_text("relative", "version: 1\npid_file: run/x.pid\n").is_err());
    }
}
