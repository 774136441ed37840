//! Pingora's own server YAML, loaded strictly: Pingora ignores unknown keys, we refuse them.

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
    let conf = ServerConf::from_yaml(&text)
        .map_err(|e| ConfigError::new(path, "", format!("invalid Pingora server conf: {e}")))?;
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
