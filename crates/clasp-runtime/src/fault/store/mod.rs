//! Where checkpoints are kept: one small interface, a local directory (the embedded default:
//! atomic renames and fsync) and Redis (for runs over several processes or hosts).
//!
//! A store holds named blobs. A checkpoint is a set of them: each worker's key groups in one
//! blob, and the planner's manifest, written last; a blob is written whole or not at all.

mod dir;
mod redis;

pub use dir::DirStore;
pub use redis::RedisStore;

use std::sync::Arc;
use std::time::Duration;

/// Why a store operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A file of a directory store.
    #[error("checkpoint store {path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A Redis store.
    #[error("checkpoint store at Redis {addr}: {source}")]
    Redis {
        /// The server's address.
        addr: String,
        /// Why.
        #[source]
        source: ::redis::RedisError,
    },
    /// The store's location is not understood.
    #[error("checkpoint store `{spec}`: {why}")]
    Spec {
        /// What was given.
        spec: String,
        /// What is wrong with it.
        why: String,
    },
}

/// Named blobs, each written atomically.
pub trait CheckpointStore: Send + Sync + std::fmt::Debug {
    /// Where the store is (a path or an address), for messages and for workers to open it.
    fn location(&self) -> String;
    /// Writes `name` whole, replacing any blob of that name; durable once this returns.
    fn put(&self, name: &str, bytes: &[u8]) -> Result<(), StoreError>;
    /// The blob `name`, if there is one.
    fn get(&self, name: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Names of the blobs starting with `prefix`, sorted.
    fn list(&self, prefix: &str) -> Result<Vec<String>, StoreError>;
    /// Removes `name` (nothing if absent).
    fn delete(&self, name: &str) -> Result<(), StoreError>;
}

/// How long connecting to a Redis store may take before the run fails.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Opens the store at `location`: `redis://HOST:PORT[/PREFIX]` (keys under `PREFIX:`, default
/// `clasp`) or a directory path (created if missing).
pub fn open(location: &str) -> Result<Arc<dyn CheckpointStore>, StoreError> {
    if location.starts_with("redis://") {
        Ok(Arc::new(RedisStore::open(location)?))
    } else if location.contains("://") {
        Err(StoreError::Spec {
            spec: location.into(),
            why: "expected a directory or redis://HOST:PORT[/PREFIX]".into(),
        })
    } else {
        let path = location.strip_prefix("dir:").unwrap_or(location);
        Ok(Arc::new(DirStore::open(path)?))
    }
}

/// A blob name is a short word of letters, digits, `-`, `_` and `.`, never a path.
fn check_name(name: &str) -> Result<(), StoreError> {
    let ok = !name.is_empty()
        && name.len() <= 200
        && !name.starts_with('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(StoreError::Spec { spec: name.into(), why: "not a valid blob name".into() })
    }
}

#[cfg(test)]
pub(crate) mod tests;
