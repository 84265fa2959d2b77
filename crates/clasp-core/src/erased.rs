//! Operators with their state type erased, as the runtime and the local driver hold them.

use crate::batch::Batch;
use crate::ids::KeyGroup;
use crate::operator::{Context, Emitter, LATE, OpenInfo, Operator, Rejections};
use crate::state::{KeyedStore, StateStore};
use crate::time::{TimeDomain, Timer, TimerUse};
use std::any::TypeId;

/// What one execution did, for the metrics monitor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Execution {
    /// Whether the request read or wrote keyed state.
    pub touched_state: bool,
}

/// Rounds of firing at the end of the input at most: a timer set while timers fire at the end
/// fires in the next round, and an operator that keeps setting them must not spin forever.
const FINAL_ROUNDS: usize = 64;

/// An operator with its state type erased.
pub trait DynOperator: Send + Sync {
    /// A new, empty state store with `groups` key groups.
    fn new_store(&self, groups: u32) -> Box<dyn StateStore>;
    /// Whether the implementation keeps state (its `State` is not `()`).
    fn keeps_state(&self) -> bool;
    /// The timers it uses.
    fn timers(&self) -> TimerUse;
    /// [`Operator::open`].
    fn open(&mut self, info: &OpenInfo<'_>) -> Result<(), String>;
    /// [`Operator::close`].
    fn close(&self);
    /// Processes one request against `store` (which must come from [`DynOperator::new_store`]).
    /// With `late_until`, records whose event time is at or below it are counted as `late`
    /// instead of processed.
    fn process(
        &self,
        input: &Batch,
        input_port: usize,
        late_until: Option<u64>,
        store: &dyn StateStore,
        out: &mut dyn Emitter,
        rejects: &mut Rejections,
    ) -> Execution;
    /// Fires the timers of `domain` due by `until` in `store`, in time then key order (at the
    /// end of the input, `until = u64::MAX`, also the timers set meanwhile).
    fn fire(
        &self,
        domain: TimeDomain,
        until: u64,
        store: &dyn StateStore,
        out: &mut dyn Emitter,
        rejects: &mut Rejections,
    ) -> Execution;
}

impl std::fmt::Debug for dyn DynOperator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynOperator").field("keeps_state", &self.keeps_state()).finish()
    }
}

struct Erased<T> {
    op: T,
    timers: TimerUse,
}

impl<T: Operator> Erased<T> {
    fn typed(store: &dyn StateStore) -> &KeyedStore<T::State> {
        store
            .as_any()
            .downcast_ref::<KeyedStore<T::State>>()
            .expect("the runtime passes the store this operator created")
    }
}

/// The records of `input` that are not late, and how many were.
fn on_time(input: &Batch, late_until: u64) -> Option<(Batch, u64)> {
    let late = (0..input.len()).filter(|&i| input.time(i).is_some_and(|t| t <= late_until)).count();
    if late == 0 {
        return None;
    }
    let mut kept = Batch::with_capacity(input.len() - late, input.byte_len());
    for i in 0..input.len() {
        if input.time(i).is_none_or(|t| t > late_until) {
            kept.push_from(input, i);
        }
    }
    Some((kept, late as u64))
}

impl<T: Operator> DynOperator for Erased<T> {
    fn new_store(&self, groups: u32) -> Box<dyn StateStore> {
        Box::new(KeyedStore::<T::State>::new(groups))
    }

    fn keeps_state(&self) -> bool {
        TypeId::of::<T::State>() != TypeId::of::<()>()
    }

    fn timers(&self) -> TimerUse {
        self.timers
    }

    fn open(&mut self, info: &OpenInfo<'_>) -> Result<(), String> {
        self.op.open(info)?;
        self.timers = self.op.timers();
        Ok(())
    }

    fn close(&self) {
        self.op.close();
    }

    fn process(
        &self,
        input: &Batch,
        input_port: usize,
        late_until: Option<u64>,
        store: &dyn StateStore,
        out: &mut dyn Emitter,
        rejects: &mut Rejections,
    ) -> Execution {
        let store = Self::typed(store);
        let filtered = match late_until {
            Some(until) if self.timers.event && input.is_timed() => on_time(input, until),
            _ => None,
        };
        let input = match &filtered {
            Some((kept, late)) => {
                rejects.add_many(LATE, *late);
                kept
            }
            None => input,
        };
        let mut ctx = Context::new(store, out, input_port, rejects);
        self.op.process(input, &mut ctx);
        Execution { touched_state: ctx.touched_state() }
    }

    fn fire(
        &self,
        domain: TimeDomain,
        until: u64,
        store: &dyn StateStore,
        out: &mut dyn Emitter,
        rejects: &mut Rejections,
    ) -> Execution {
        let store = Self::typed(store);
        let mut touched = false;
        let mut due = Vec::new();
        let rounds = if until == u64::MAX { FINAL_ROUNDS } else { 1 };
        for _ in 0..rounds {
            due.clear();
            for g in 0..store.group_count() {
                store.take_due_timers(KeyGroup(g), domain, until, &mut due);
            }
            if due.is_empty() {
                break;
            }
            // Across groups too, timers fire in (time, key) order.
            due.sort_unstable();
            let mut ctx = Context::new(store, out, 0, rejects);
            for (time, key) in &due {
                let timer = Timer { key, time: *time, domain };
                self.op.on_timer(timer, &mut ctx);
            }
            touched = true;
        }
        Execution { touched_state: touched }
    }
}

/// Wraps a typed operator for the runtime.
pub fn erase<T: Operator>(op: T) -> Box<dyn DynOperator> {
    let timers = op.timers();
    Box::new(Erased { op, timers })
}
