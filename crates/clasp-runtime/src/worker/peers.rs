//! The table of a worker's links to its peers. A link exists as soon as the worker learns of
//! the peer (messages queue on it); its queue waits here until the connection is up.
//!
//! Links and waiting queues share one lock: the acceptor and connecting threads create and
//! take them while the control loop lists the connected peers, and two locks taken in
//! different orders by those threads could deadlock a scale-out.

use crate::net::Link;
use crate::wire::Message;
use clasp_core::WorkerId;
use clasp_core::sync::{read, write};
use crossbeam_channel::Receiver;
use std::collections::HashMap;
use std::sync::RwLock;

#[derive(Default)]
struct Table {
    /// By peer id; `None` for peers never known or dropped.
    links: Vec<Option<Link>>,
    /// Queues of links whose connection is not up yet.
    waiting: HashMap<WorkerId, Receiver<Message>>,
}

impl Table {
    fn ensure(&mut self, w: WorkerId) -> Link {
        if self.links.len() <= w.index() {
            self.links.resize(w.index() + 1, None);
        }
        if let Some(l) = &self.links[w.index()] {
            return l.clone();
        }
        let (link, rx) = Link::pending();
        self.links[w.index()] = Some(link.clone());
        self.waiting.insert(w, rx);
        link
    }
}

/// A worker's links to its peers.
#[derive(Default)]
pub(super) struct PeerLinks {
    table: RwLock<Table>,
}

impl PeerLinks {
    /// The link to `w`, if known.
    pub(super) fn get(&self, w: WorkerId) -> Option<Link> {
        read(&self.table).links.get(w.index()).and_then(Clone::clone)
    }

    /// The link to `w`, created (its queue waiting for the connection) if new.
    pub(super) fn ensure(&self, w: WorkerId) -> Link {
        write(&self.table).ensure(w)
    }

    /// Takes the link to `w` and its queue for a connection that just came up, creating the
    /// link if new; `None` when the link is already connected.
    pub(super) fn connect(&self, w: WorkerId) -> Option<(Link, Receiver<Message>)> {
        let mut t = write(&self.table);
        let link = t.ensure(w);
        let rx = t.waiting.remove(&w)?;
        Some((link, rx))
    }

    /// Forgets the link to `w` (the peer left).
    pub(super) fn remove(&self, w: WorkerId) {
        let mut t = write(&self.table);
        if let Some(slot) = t.links.get_mut(w.index()) {
            *slot = None;
        }
        t.waiting.remove(&w);
    }

    /// Peers whose connection is up, by id.
    pub(super) fn connected(&self) -> Vec<WorkerId> {
        let t = read(&self.table);
        t.links
            .iter()
            .enumerate()
            .filter(|(w, l)| l.is_some() && !t.waiting.contains_key(&WorkerId::from(*w)))
            .map(|(w, _)| WorkerId::from(w))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_link_counts_as_connected_once_its_connection_took_the_queue() {
        let peers = PeerLinks::default();
        let early = peers.ensure(WorkerId(3));
        assert!(early.send(Message::Heartbeat), "a known peer's link queues before it connects");
        assert_eq!(peers.connected(), Vec::<WorkerId>::new());
        let (_, rx) = peers.connect(WorkerId(3)).expect("the first connection takes the queue");
        assert!(matches!(rx.try_recv(), Ok(Message::Heartbeat)), "what was queued is kept");
        assert!(peers.connect(WorkerId(3)).is_none(), "a second connection finds none");
        assert_eq!(peers.connected(), vec![WorkerId(3)]);
        peers.remove(WorkerId(3));
        assert_eq!(peers.connected(), Vec::<WorkerId>::new());
        assert!(peers.get(WorkerId(3)).is_none());
        assert!(peers.connect(WorkerId(3)).is_some(), "a peer reusing the id connects anew");
    }

    #[test]
    fn connections_and_listings_on_many_threads_end_with_every_peer_connected() {
        // The control loop lists while acceptor threads connect peers and it learns of others.
        let peers = Arc::new(PeerLinks::default());
        let n = 64u32;
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                let peers = peers.clone();
                std::thread::spawn(move || {
                    for w in (t..n).step_by(4) {
                        peers.ensure(WorkerId(n - 1 - w));
                        let _ = peers.connect(WorkerId(w));
                        let _ = peers.connected();
                    }
                })
            })
            .collect();
        let mut last = 0;
        while last < n as usize {
            let now = peers.connected().len();
            assert!(now >= last, "the connected peers only grow");
            last = now;
            std::thread::yield_now();
        }
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(peers.connected(), (0..n).map(WorkerId).collect::<Vec<_>>());
    }
}
