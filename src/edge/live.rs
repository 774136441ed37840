//! The edge's state as last (re)loaded. Each request takes the current state when it
//! starts and keeps it to its end, so a reload (SIGHUP, `app::Reloader`) is atomic for
//! every request: all of the old configuration, or all of the new. Held sessions
//! (WebSocket, streams) keep the state they started with.

use super::{Edge, State};
use arc_swap::ArcSwap;
use std::sync::Arc;

pub struct Live {
    current: ArcSwap<State>,
}

impl Live {
    pub fn new(state: Arc<State>) -> Arc<Live> {
        Arc::new(Live {
            current: ArcSwap::new(state),
        })
    }

    pub fn current(&self) -> Arc<State> {
        self.current.load_full()
    }

    /// `f` on the current state, without taking a reference to it: no counter shared by
    /// every thread is touched (what a request's quick look before it starts wants).
    pub fn with<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        f(&self.current.load())
    }

    /// From the next request on, `state` serves.
    pub fn replace(&self, state: Arc<State>) {
        self.current.store(state);
    }
}

impl Edge {
    /// An edge that follows reloads: `state` is the one it started with.
    pub fn live(live: Arc<Live>) -> Edge {
        Edge {
            state: live.current(),
            live: Some(live),
        }
    }

    /// `f` on this edge's state as of now, without holding it.
    pub fn with_now<T>(&self, f: impl FnOnce(&State) -> T) -> T {
        match &self.live {
            Some(live) => live.with(f),
            None => f(&self.state),
        }
    }

    /// This edge as of now: one request's view, fixed for its life.
    pub fn now(&self) -> Edge {
        match &self.live {
            Some(live) => Edge {
                state: live.current(),
                live: None,
            },
            None => Edge {
                state: self.state.clone(),
                live: None,
            },
        }
    }
}
