//! Secret references: config never holds a secret, only where to find one.
//!
//! `env:NAME` reads an environment variable, `file:/abs/path` a file's first line,
//! `cred:NAME` a systemd credential (`$CREDENTIALS_DIRECTORY/NAME`).

use serde::Deserialize;
use std::fmt;

#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(transparent)]
pub struct SecretRef(pub String);

/// A resolved secret. Its `Debug` never shows the value.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// A header value the edge sets itself that is no secret (kept in the same type so
    /// it travels with a host's secret headers).
    pub fn not_secret(value: &str) -> Secret {
        Secret(value.to_string())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl SecretRef {
    pub fn resolve(&self) -> Result<Secret, String> {
        let (scheme, rest) = self.0.split_once(':').ok_or_else(|| {
            format!(
                "'{}' is not a secret reference (env:NAME, file:/path or cred:NAME)",
                self.0
            )
        })?;
        let value = match scheme {
            "env" => std::env::var(rest)
                .map_err(|_| format!("environment variable {rest} is not set"))?,
            "file" => read_first_line(rest)?,
            "cred" => {
                let dir = std::env::var("CREDENTIALS_DIRECTORY")
                    .map_err(|_| format!("cred:{rest}: CREDENTIALS_DIRECTORY is not set (not under systemd LoadCredential=)"))?;
                read_first_line(&format!("{dir}/{rest}"))?
            }
            other => {
                return Err(format!(
                    "unknown secret scheme '{other}:' (use env:, file: or cred:)"
                ))
            }
        };
        let value = value.trim().to_string();
        if value.is_empty() {
            return Err(format!(
                "secret reference {scheme}:{rest} resolves to an empty value"
            ));
        }
        Ok(Secret(value))
    }
}

fn read_first_line(path: &str) -> Result<String, String> {
    if !path.starts_with('/') {
        return Err(format!("file:{path}: path must be absolute"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("file:{path}: {e}"))?;
    Ok(text.lines().next().unwrap_or("").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_env_and_rejects_unknown() {
        std::env::set_var("CHAINEDGE_TEST_SECRET_X", "s3cret");
        let s = SecretRef("env:CHAINEDGE_TEST_SECRET_X".into())
            .resolve()
            .unwrap();
        assert_eq!(s.expose(), "s3cret");
        assert_eq!(format!("{s:?}"), "Secret(***)");
        assert!(SecretRef("env:CHAINEDGE_TEST_UNSET_Y".into())
            .resolve()
            .is_err());
        assert!(SecretRef("vault:x".into()).resolve().is_err());
        assert!(SecretRef("plain".into()).resolve().is_err());
        assert!(SecretRef("file:relative".into()).resolve().is_err());
    }
}
