//! Key groups a worker has taken over in a migration but whose state (and the requests their
//! previous owner had queued) has not arrived yet, and keyed operators whose queued requests
//! are being re-routed. Their records wait aside, so the worker runs everything else instead
//! of pausing; when a sender's message arrives (or the re-routing is done), the groups open and
//! their waiting records queue behind the requests that were older, so each key still sees its
//! records in order.

use crate::request::{Request, split_credit};
use clasp_core::hash::key_group;
use clasp_core::{Batch, KeyGroup, OperatorId};

/// The gated key groups of every operator and the records waiting for them.
#[derive(Debug, Default)]
pub(super) struct Gate {
    /// Per operator: a bit per key group, set while the group is gated (empty: none).
    groups: Vec<Vec<u64>>,
    /// Per operator: whether every one of its groups is gated.
    whole: Vec<bool>,
    /// Key groups per keyed operator.
    group_count: u32,
    /// How many groups are gated.
    gated: usize,
    /// Parts of requests for gated groups, in arrival order.
    waiting: Vec<Request>,
}

impl Gate {
    /// Whether any group is gated.
    pub(super) fn is_open(&self) -> bool {
        self.gated == 0 && !self.whole.contains(&true)
    }

    /// Gates every group of `ops` (of `count` operators).
    pub(super) fn close_operators(&mut self, count: usize, ops: &[OperatorId]) {
        if self.whole.len() < count {
            self.whole.resize(count, false);
        }
        for op in ops {
            self.whole[op.index()] = true;
        }
    }

    /// Opens what [`Gate::close_operators`] closed for `ops` (single groups stay gated); returns
    /// the waiting records no longer gated, in arrival order.
    pub(super) fn open_operators(&mut self, ops: &[OperatorId]) -> Vec<Request> {
        for op in ops {
            if let Some(w) = self.whole.get_mut(op.index()) {
                *w = false;
            }
        }
        self.release()
    }

    /// Gates `groups` (of `group_count` per operator, `ops` operators).
    pub(super) fn close(
        &mut self,
        ops: usize,
        group_count: u32,
        groups: &[(OperatorId, KeyGroup)],
    ) {
        if self.groups.len() < ops || self.group_count != group_count {
            self.groups = vec![Vec::new(); ops];
            self.group_count = group_count;
        }
        for &(op, g) in groups {
            let bits = &mut self.groups[op.index()];
            if bits.is_empty() {
                bits.resize((group_count as usize).div_ceil(64), 0);
            }
            let (word, bit) = (g.0 as usize / 64, 1u64 << (g.0 % 64));
            if let Some(w) = bits.get_mut(word)
                && *w & bit == 0
            {
                *w |= bit;
                self.gated += 1;
            }
        }
    }

    fn is_gated(&self, op: OperatorId, hash: u64) -> bool {
        if self.whole.get(op.index()).copied().unwrap_or(false) {
            return true;
        }
        let Some(bits) = self.groups.get(op.index()).filter(|b| !b.is_empty()) else {
            return false;
        };
        let g = key_group(hash, self.group_count).0 as usize;
        bits.get(g / 64).is_some_and(|w| w & (1 << (g % 64)) != 0)
    }

    /// The part of `req` that may run now; the rest waits. Credit is split exactly.
    pub(super) fn admit(&mut self, req: Request) -> Option<Request> {
        let whole = self.whole.get(req.op.index()).copied().unwrap_or(false);
        if !whole && (self.gated == 0 || self.groups.get(req.op.index()).is_none_or(Vec::is_empty))
        {
            return Some(req);
        }
        if whole {
            self.waiting.push(req);
            return None;
        }
        let gated = req.batch.iter().filter(|r| self.is_gated(req.op, r.hash)).count();
        if gated == 0 {
            return Some(req);
        }
        if gated == req.batch.len() {
            self.waiting.push(req);
            return None;
        }
        let (mut now, mut later) = (Batch::new(), Batch::new());
        for (i, r) in req.batch.iter().enumerate() {
            let part = if self.is_gated(req.op, r.hash) { &mut later } else { &mut now };
            part.push_from(&req.batch, i);
        }
        let mut shares = split_credit(req.credit, 2);
        let part = |batch: Batch, credit: u64| Request { batch, credit, enqueued: None, ..req };
        let (a, b) = (shares.next().unwrap_or(0), shares.next().unwrap_or(0));
        self.waiting.push(part(later, b));
        Some(part(now, a))
    }

    /// Opens `groups`; returns the waiting records no longer gated, in arrival order.
    pub(super) fn open(&mut self, groups: &[(OperatorId, KeyGroup)]) -> Vec<Request> {
        for &(op, g) in groups {
            let Some(bits) = self.groups.get_mut(op.index()) else { continue };
            let (word, bit) = (g.0 as usize / 64, 1u64 << (g.0 % 64));
            if let Some(w) = bits.get_mut(word)
                && *w & bit != 0
            {
                *w &= !bit;
                self.gated -= 1;
            }
        }
        if self.gated == 0 {
            for bits in &mut self.groups {
                bits.clear();
            }
        }
        self.release()
    }

    /// The waiting records no longer gated, in arrival order.
    fn release(&mut self) -> Vec<Request> {
        std::mem::take(&mut self.waiting).into_iter().filter_map(|r| self.admit(r)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::FULL_CREDIT;
    use clasp_core::hash::key_hash;

    fn request(keys: &[&str]) -> Request {
        let mut batch = Batch::new();
        for k in keys {
            batch.push(k.as_bytes(), b"1");
        }
        let mut r = Request::new(OperatorId(1), 0, 9, 2, batch);
        r.credit = FULL_CREDIT / 4;
        r
    }

    fn group(key: &str, groups: u32) -> KeyGroup {
        key_group(key_hash(key.as_bytes()), groups)
    }

    fn keys(r: &Request) -> Vec<String> {
        r.batch.iter().map(|x| String::from_utf8(x.key.to_vec()).unwrap()).collect()
    }

    #[test]
    fn records_of_gated_groups_wait_and_are_released_in_order_with_their_credit() {
        let n = 1024;
        let mut gate = Gate::default();
        assert!(gate.admit(request(&["a", "b"])).is_some(), "nothing gated");
        let (ga, gb) = (group("a", n), group("b", n));
        assert_ne!(ga, gb);
        gate.close(2, n, &[(OperatorId(1), ga)]);
        // An operator without gated groups passes whole.
        let mut other = request(&["a"]);
        other.op = OperatorId(0);
        assert_eq!(keys(&gate.admit(other).unwrap()), ["a"]);
        let now = gate.admit(request(&["a", "b", "a"])).unwrap();
        assert_eq!(keys(&now), ["b"]);
        assert!(gate.admit(request(&["a"])).is_none(), "wholly gated");
        let released = gate.open(&[(OperatorId(1), ga)]);
        assert!(gate.is_open());
        let released_keys: Vec<Vec<String>> = released.iter().map(keys).collect();
        assert_eq!(released_keys, [vec!["a", "a"], vec!["a"]]);
        let credit: u64 = now.credit + released.iter().map(|r| r.credit).sum::<u64>();
        assert_eq!(credit, FULL_CREDIT / 2, "credit of both requests is all accounted for");
        assert!(released.iter().all(|r| r.chain == 9 && r.epoch == 2));
    }

    #[test]
    fn opening_one_sender_s_groups_keeps_the_others_gated() {
        let n = 1024;
        let mut gate = Gate::default();
        let (ga, gb) = (group("a", n), group("b", n));
        gate.close(2, n, &[(OperatorId(1), ga), (OperatorId(1), gb)]);
        assert!(gate.admit(request(&["a", "b"])).is_none());
        let released = gate.open(&[(OperatorId(1), gb)]);
        assert_eq!(released.iter().map(keys).collect::<Vec<_>>(), [vec!["b"]]);
        assert!(!gate.is_open());
        let released = gate.open(&[(OperatorId(1), ga)]);
        assert_eq!(released.iter().map(keys).collect::<Vec<_>>(), [vec!["a"]]);
    }

    #[test]
    fn a_whole_operator_waits_while_its_queue_is_re_routed_and_single_groups_stay_gated() {
        let n = 1024;
        let mut gate = Gate::default();
        let ga = group("a", n);
        gate.close(2, n, &[(OperatorId(1), ga)]);
        gate.close_operators(2, &[OperatorId(1)]);
        assert!(gate.admit(request(&["b"])).is_none(), "every group of the operator waits");
        assert!(gate.admit(request(&["a", "b"])).is_none());
        let released = gate.open_operators(&[OperatorId(1)]);
        assert_eq!(released.iter().map(keys).collect::<Vec<_>>(), [vec!["b"], vec!["b"]]);
        assert!(!gate.is_open(), "group a still waits for its state");
        let released = gate.open(&[(OperatorId(1), ga)]);
        assert_eq!(released.iter().map(keys).collect::<Vec<_>>(), [vec!["a"]]);
        assert!(gate.is_open());
    }
}
