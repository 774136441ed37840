//! One-time sign-in codes by email: 6 digits, stored hashed with the address, short-lived,
//! single-use, limited in guesses and in how many one address can be sent.
//! Delivery is SMTP (plain for local relays, STARTTLS or TLS) or, in the demo, a JSON-lines
//! outbox file.

use crate::config::{Loaded, SmtpSecurity};
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

pub enum Delivery {
    Smtp(AsyncSmtpTransport<Tokio1Executor>),
    Outbox(PathBuf),
    /// Email sign-in is not configured: its routes answer 503.
    Off,
}

pub struct Mailer {
    pub delivery: Delivery,
    from: String,
}

impl Mailer {
    pub fn new(cfg: &Loaded) -> Result<Mailer, String> {
        let email = &cfg.app.console.email;
        let delivery = if let Some(path) = &cfg.email_outbox {
            Delivery::Outbox(path.clone())
        } else if let Some(smtp) = &email.smtp {
            let builder = match smtp.security {
                SmtpSecurity::None => {
                    AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&smtp.host)
                }
                SmtpSecurity::Starttls => {
                    AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&smtp.host)
                        .map_err(|e| format!("console.email.smtp: {e}"))?
                }
                SmtpSecurity::Tls => AsyncSmtpTransport::<Tokio1Executor>::relay(&smtp.host)
                    .map_err(|e| format!("console.email.smtp: {e}"))?,
            };
            let mut builder = builder
                .port(smtp.port)
                .timeout(Some(Duration::from_secs(10)));
            if let Some((u, p)) = &cfg.smtp_credentials {
                builder = builder.credentials(Credentials::new(
                    u.expose().to_string(),
                    p.expose().to_string(),
                ));
            }
            Delivery::Smtp(builder.build())
        } else {
            Delivery::Off
        };
        Ok(Mailer {
            delivery,
            from: email.from.clone(),
        })
    }

    pub fn enabled(&self) -> bool {
        !matches!(self.delivery, Delivery::Off)
    }

    /// Send the code to `to` (an address already validated by `normalize`).
    pub async fn send_code(&self, to: &str, code: &str, ttl_secs: i64) -> Result<(), String> {
        let body = format!(
            "Your chainedge sign-in code is {code}\r\n\r\nIt expires in {} minutes and works once. \
             If you did not ask for it, ignore this message.\r\n",
            ttl_secs / 60
        );
        self.send(to, "Your chainedge sign-in code", body).await
    }

    /// Send a team invitation's code to `to`. The code goes in the body only (never in a
    /// link): the invitee signs in and pastes it under Team.
    pub async fn send_invite(
        &self,
        to: &str,
        team: &str,
        role: &str,
        code: &str,
        ttl_secs: i64,
    ) -> Result<(), String> {
        let body = format!(
            "You are invited to the chainedge team {team} as {role}.\r\n\r\n\
             Sign in to the console, open Team and enter this invitation code:\r\n\r\n{code}\r\n\r\n\
             It expires in {} days and works once. If you did not expect it, ignore this message.\r\n",
            ttl_secs / 86_400
        );
        self.send(to, "Your chainedge team invitation", body).await
    }

    async fn send(&self, to: &str, subject: &str, body: String) -> Result<(), String> {
        match &self.delivery {
            Delivery::Off => Err("email delivery is not configured".into()),
            Delivery::Outbox(path) => {
                let line = serde_json::json!({
                    "ts": crate::clock::rfc3339(crate::clock::now()),
                    "from": self.from, "to": to, "subject": subject, "body": body,
                })
                .to_string()
                    + "\n";
                let path = path.clone();
                // One write per line: `writeln!` writes the line and its newline separately,
                // and concurrent sign-ins would interleave them in the append-only file.
                tokio::task::spawn_blocking(move || {
                    open_private_append(&path)?.write_all(line.as_bytes())
                })
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| format!("outbox: {e}"))
            }
            Delivery::Smtp(transport) => {
                let msg = Message::builder()
                    .from(self.from.parse().map_err(|e| format!("from: {e}"))?)
                    .to(to.parse().map_err(|e| format!("to: {e}"))?)
                    .subject(subject)
                    .header(ContentType::TEXT_PLAIN)
                    .body(body)
                    .map_err(|e| e.to_string())?;
                transport
                    .send(msg)
                    .await
                    .map(|_| ())
                    .map_err(|e| format!("smtp: {e}"))
            }
        }
    }
}

fn open_private_append(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
}

/// Lower-cased, trimmed address if it is a plausible single mailbox; no display names,
/// no header-injection characters.
pub fn normalize(email: &str) -> Option<String> {
    let e = email.trim().to_ascii_lowercase();
    if e.len() > 254
        || e.chars()
            .any(|c| c.is_whitespace() || c.is_control() || "<>,;:\"()[]\\".contains(c))
    {
        return None;
    }
    let (local, domain) = e.split_once('@')?;
    if local.is_empty() || local.len() > 64 || domain.contains('@') || !domain.contains('.') {
        return None;
    }
    if domain.starts_with('.') || domain.ends_with('.') || domain.contains("..") {
        return None;
    }
    e.parse::<lettre::Address>().ok()?;
    Some(e)
}

/// A uniformly random 6-digit code.
pub fn new_code() -> String {
    use rand::Rng;
    format!("{:06}", rand::thread_rng().gen_range(0..1_000_000))
}

/// What the store keeps: the code bound to its address.
pub fn code_hash(email: &str, code: &str) -> [u8; 32] {
    crate::crypto::sha256(&format!("{email}:{code}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            normalize(" Ada@Example.COM ").as_deref(),
            Some("ada@example.com")
        );
        for bad in [
            "",
            "a",
            "a@b",
            "a@@b.c",
            "a b@c.d",
            "a@b.c\r\nBcc: x@y.z",
            "<a@b.c>",
            "a@.b.c",
            "a@b..c",
        ] {
            assert!(normalize(bad).is_none(), "{bad:?}");
        }
        assert_eq!(new_code().len(), 6);
        assert_ne!(code_hash("a@b.c", "123456"), code_hash("x@b.c", "123456"));
    }
}
