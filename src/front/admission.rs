//! Caps on concurrent client connections, per listener and per client address.
//!
//! Checked once per accepted connection, before a byte is read: a connection over a cap
//! is closed at once (counted in `chainedge_connections_refused_total`), so a flood of
//! idle or trickling connections from one address cannot take every slot, and the
//! listener as a whole stays within what the process can hold.

use crate::observe::metrics;
use foldhash::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

pub struct Admission {
    per_listener: usize,
    per_client: usize,
    open: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    listeners: HashMap<SocketAddr, usize>,
    clients: HashMap<IpAddr, usize>,
}

/// A connection's place; given back when dropped.
pub struct Slot {
    admission: Arc<Admission>,
    listener: Option<SocketAddr>,
    client: Option<IpAddr>,
}

impl Admission {
    /// `0` turns a cap off.
    pub fn new(per_listener: usize, per_client: usize) -> Arc<Self> {
        Arc::new(Admission {
            per_listener,
            per_client,
            open: Mutex::new(Counts::default()),
        })
    }

    /// A slot for a connection accepted on `listener` from `client`, or `Err(cap)` with
    /// the cap that is full (`listener` or `client`).
    pub fn admit(
        self: &Arc<Self>,
        listener: Option<SocketAddr>,
        client: Option<IpAddr>,
    ) -> Result<Slot, &'static str> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let on_listener = listener.map_or(0, |l| open.listeners.get(&l).copied().unwrap_or(0));
        let from_client = client.map_or(0, |c| open.clients.get(&c).copied().unwrap_or(0));
        let refused = if self.per_listener > 0 && on_listener >= self.per_listener {
            Some("listener")
        } else if self.per_client > 0 && from_client >= self.per_client {
            Some("client")
        } else {
            None
        };
        if let Some(cap) = refused {
            drop(open);
            metrics::connection_refused(cap);
            return Err(cap);
        }
        if let Some(l) = listener {
            *open.listeners.entry(l).or_default() += 1;
        }
        if let Some(c) = client {
            *open.clients.entry(c).or_default() += 1;
        }
        Ok(Slot {
            admission: self.clone(),
            listener,
            client,
        })
    }

    #[cfg(test)]
    fn open_from(&self, client: IpAddr) -> usize {
        let open = self.open.lock().unwrap();
        open.clients.get(&client).copied().unwrap_or(0)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self
            .admission
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        // Entries at zero are removed, so the maps hold only addresses with connections.
        fn release<K: std::hash::Hash + Eq>(map: &mut HashMap<K, usize>, key: K) {
            if let Some(n) = map.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    map.remove(&key);
                }
            }
        }
        if let Some(l) = self.listener {
            release(&mut open.listeners, l);
        }
        if let Some(c) = self.client {
            release(&mut open.clients, c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_bite_per_client_and_per_listener_and_slots_come_back() {
        let adm = Admission::new(3, 2);
        let l: SocketAddr = "127.0.0.1:80".parse().unwrap();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let a1 = adm.admit(Some(l), Some(a)).unwrap();
        let _a2 = adm.admit(Some(l), Some(a)).unwrap();
        assert_eq!(adm.admit(Some(l), Some(a)).err(), Some("client"));
        let _b1 = adm.admit(Some(l), Some(b)).unwrap();
        assert_eq!(adm.admit(Some(l), Some(b)).err(), Some("listener"));
        drop(a1);
        assert_eq!(adm.open_from(a), 1);
        assert!(adm.admit(Some(l), Some(a)).is_ok());
        // Off when zero.
        let open = Admission::new(0, 0);
        let held: Vec<_> = (0..100)
            .map(|_| open.admit(Some(l), Some(a)).unwrap())
            .collect();
        assert_eq!(held.len(), 100);
    }
}
