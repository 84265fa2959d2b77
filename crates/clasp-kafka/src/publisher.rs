//! The exactly-once sink's producer thread: a committed checkpoint's segment is produced on a
//! thread and connection of its own, so the planner goes on (its sink keeps taking records,
//! its workers' connections keep being read) while the records go out.
//!
//! At most one committed segment is outstanding: the next checkpoint's boundary waits for it
//! ([`Publisher::wait_idle`], which the planner avoids by starting a checkpoint only when the
//! sink is not publishing). So a planner that dies leaves at most the last committed
//! checkpoint's segment unproduced, and a resumed job completes exactly that one
//! ([`crate::staging::complete`]).

use crate::error::KafkaError;
use crate::segment::Segment;
use crate::sink::KafkaSink;
use clasp_runtime::fault::store::CheckpointStore;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

/// What the thread has done, shared with the sink.
struct Progress {
    /// Segments handed over and not yet produced and deleted.
    outstanding: usize,
    /// Each partition's end offset after the thread's last produce.
    ends: Vec<i64>,
    /// The thread's error; it stops at the first.
    failed: Option<KafkaError>,
    /// Whether `failed` was reported already.
    stopped: bool,
}

impl Progress {
    /// Whether handed-over segments are still on their way: none once the thread stopped.
    fn producing(&self) -> bool {
        self.outstanding > 0 && self.failed.is_none() && !self.stopped
    }
}

type Shared = Arc<(Mutex<Progress>, Condvar)>;

fn lock(shared: &Shared) -> MutexGuard<'_, Progress> {
    shared.0.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Produces committed segments in order on a thread of its own.
pub(crate) struct Publisher {
    queue: Option<Sender<Segment>>,
    shared: Shared,
    thread: Option<JoinHandle<()>>,
    topic: String,
}

impl Publisher {
    /// Starts the thread with `sink` (a connection of its own) and deletes each produced
    /// segment from `store`.
    pub(crate) fn spawn(
        sink: KafkaSink,
        store: Arc<dyn CheckpointStore>,
    ) -> Result<Self, KafkaError> {
        let topic = sink.connection.address.topic.clone();
        let shared: Shared = Arc::new((
            Mutex::new(Progress {
                outstanding: 0,
                ends: sink.ends.clone(),
                failed: None,
                stopped: false,
            }),
            Condvar::new(),
        ));
        let (queue, segments) = std::sync::mpsc::channel();
        let progress = shared.clone();
        let thread = std::thread::Builder::new()
            .name("kafka-publisher".into())
            .spawn(move || run(sink, &*store, segments, &progress))
            .map_err(KafkaError::Runtime)?;
        Ok(Self { queue: Some(queue), shared, thread: Some(thread), topic })
    }

    /// Hands a committed segment to the thread; fails with the thread's error, if it stopped.
    pub(crate) fn submit(&self, segment: Segment) -> Result<(), KafkaError> {
        self.failure()?;
        lock(&self.shared).outstanding += 1;
        let sent = self.queue.as_ref().is_some_and(|q| q.send(segment).is_ok());
        if !sent {
            lock(&self.shared).outstanding -= 1;
            return Err(self.stopped());
        }
        Ok(())
    }

    /// Whether a handed-over segment is still being produced.
    pub(crate) fn busy(&self) -> bool {
        lock(&self.shared).producing()
    }

    /// Waits until every handed-over segment is produced; fails with the thread's error.
    pub(crate) fn wait_idle(&self) -> Result<(), KafkaError> {
        let mut p = lock(&self.shared);
        while p.producing() {
            p = self.shared.1.wait(p).unwrap_or_else(PoisonError::into_inner);
        }
        drop(p);
        self.failure()
    }

    /// Each partition's end offset after the last produce that completed.
    pub(crate) fn ends(&self) -> Vec<i64> {
        lock(&self.shared).ends.clone()
    }

    /// The thread's error, once; a later call names the stop.
    fn failure(&self) -> Result<(), KafkaError> {
        let mut p = lock(&self.shared);
        if let Some(e) = p.failed.take() {
            p.stopped = true;
            return Err(e);
        }
        if p.stopped {
            return Err(self.stopped());
        }
        Ok(())
    }

    fn stopped(&self) -> KafkaError {
        KafkaError::PublisherStopped { topic: self.topic.clone() }
    }
}

impl Drop for Publisher {
    /// Lets the thread finish what was committed, then joins it.
    fn drop(&mut self) {
        self.queue = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(
    mut sink: KafkaSink,
    store: &dyn CheckpointStore,
    segments: Receiver<Segment>,
    shared: &Shared,
) {
    for segment in segments {
        let checkpoint = segment.checkpoint;
        let result = crate::staging::produce_segment(&mut sink, segment, &Default::default())
            .and_then(|()| crate::staging::delete_segment(store, checkpoint));
        let mut p = lock(shared);
        p.ends.clone_from(&sink.ends);
        match result {
            Ok(()) => p.outstanding -= 1,
            Err(e) => p.failed = Some(e),
        }
        let failed = p.failed.is_some();
        drop(p);
        shared.1.notify_all();
        if failed {
            return;
        }
    }
}
