//! Work that nothing waits for, on a thread of the lowest scheduling priority.
//!
//! After a migration a worker frees the entries it gave up and decodes those it received:
//! milliseconds of CPU for tens of thousands of keys, while the completions and the first
//! requests after the migration still pass through the links' and the control loops' threads.
//! On a machine with few cores a thread at normal priority doing that work keeps its core for
//! a whole time slice (several ms) before a woken thread gets it; at the lowest priority it
//! yields the core as soon as one wakes.

use clasp_core::sync::lock;
use std::sync::{Arc, Mutex};

/// Runs `work` on a new thread of the lowest priority (niceness 19), or on this one if no
/// thread can be started.
pub(super) fn run_in_background(name: String, work: impl FnOnce() + Send + 'static) {
    let work = Arc::new(Mutex::new(Some(work)));
    let theirs = work.clone();
    let spawned = std::thread::Builder::new().name(name.clone()).spawn(move || {
        let lowest = thread_priority::ThreadPriority::Min;
        if let Err(e) = thread_priority::set_current_thread_priority(lowest) {
            tracing::debug!("{name}: runs at normal priority: {e}");
        }
        let work = lock(&theirs).take();
        if let Some(work) = work {
            work();
        }
    });
    if let Err(e) = spawned {
        tracing::debug!("no background thread ({e}): the work runs on the caller's");
        let work = lock(&work).take();
        if let Some(work) = work {
            work();
        }
    }
}
