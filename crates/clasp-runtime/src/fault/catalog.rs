//! The checkpoints in a store: the latest one that is whole (its manifest's and every blob's
//! checksum verified), retention, and clearing what never committed.

use super::manifest::{self, Manifest, fingerprint, id_of, manifest_name};
use super::store::{CheckpointStore, StoreError};
use clasp_core::Pipeline;

/// Why no checkpoint can be used.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The checkpoint is of another pipeline.
    #[error(
        "checkpoint {id} in {location} is of pipeline `{found}` (fingerprint {found_print:08x}), not of `{expected}` ({expected_print:08x}): refusing to resume another job"
    )]
    OtherPipeline {
        /// The checkpoint.
        id: u64,
        /// The store.
        location: String,
        /// Its pipeline.
        found: String,
        /// Its fingerprint.
        found_print: u32,
        /// This job's pipeline.
        expected: String,
        /// This job's fingerprint.
        expected_print: u32,
    },
    /// The checkpoint has another number of key groups.
    #[error(
        "checkpoint {id} in {location} has {found} key groups per operator, this run {expected}: run with --key-groups {found}"
    )]
    KeyGroups {
        /// The checkpoint.
        id: u64,
        /// The store.
        location: String,
        /// Its key groups.
        found: u32,
        /// This run's.
        expected: u32,
    },
}

/// The newest usable checkpoint, if any, and what was passed over to find it.
#[derive(Debug)]
pub struct Found {
    /// Its manifest (`None`: no whole checkpoint).
    pub manifest: Option<Manifest>,
    /// One line per damaged checkpoint passed over, naming the file.
    pub warnings: Vec<String>,
}

/// Ids of the committed checkpoints (those with a manifest), newest first.
pub fn committed(store: &dyn CheckpointStore) -> Result<Vec<u64>, StoreError> {
    let mut ids: Vec<u64> = store
        .list("ckpt-")?
        .iter()
        .filter(|n| n.ends_with(".manifest"))
        .filter_map(|n| id_of(n))
        .collect();
    ids.sort_unstable_by(|a, b| b.cmp(a));
    Ok(ids)
}

/// The newest checkpoint of `p` whose manifest and blobs are whole. A damaged one is passed
/// over with a warning naming its file; one of another pipeline is an error.
pub fn latest(
    store: &dyn CheckpointStore,
    p: &Pipeline,
    key_groups: u32,
) -> Result<Found, CatalogError> {
    let location = store.location();
    let mut warnings = Vec::new();
    for id in committed(store)? {
        let name = manifest_name(id);
        let Some(bytes) = store.get(&name)? else { continue };
        let m = match Manifest::decode(&bytes) {
            Ok(m) => m,
            Err(e) => {
                warnings.push(format!(
                    "checkpoint {id}: {location}/{name} is unusable ({e}); using the one before"
                ));
                continue;
            }
        };
        let expected_print = fingerprint(p);
        if m.fingerprint != expected_print || m.pipeline != p.name {
            return Err(CatalogError::OtherPipeline {
                id,
                location,
                found: m.pipeline,
                found_print: m.fingerprint,
                expected: p.name.clone(),
                expected_print,
            });
        }
        if m.key_groups != key_groups {
            return Err(CatalogError::KeyGroups {
                id,
                location,
                found: m.key_groups,
                expected: key_groups,
            });
        }
        match damaged_blob(store, &m)? {
            None => return Ok(Found { manifest: Some(m), warnings }),
            Some(why) => {
                warnings.push(format!("checkpoint {id}: {location}/{why}; using the one before"))
            }
        }
    }
    Ok(Found { manifest: None, warnings })
}

/// The first blob of `m` that is missing or fails its checksum, and how.
fn damaged_blob(store: &dyn CheckpointStore, m: &Manifest) -> Result<Option<String>, StoreError> {
    for b in &m.blobs {
        let Some(bytes) = store.get(&b.name)? else {
            return Ok(Some(format!("{} is missing", b.name)));
        };
        if bytes.len() as u64 != b.bytes {
            return Ok(Some(format!(
                "{} has {} bytes, the manifest says {} (truncated)",
                b.name,
                bytes.len(),
                b.bytes
            )));
        }
        if crc32fast::hash(&bytes) != b.crc32 {
            return Ok(Some(format!("{} fails its checksum (corrupt)", b.name)));
        }
    }
    Ok(None)
}

/// Deletes every checkpoint but the `keep` newest committed ones, and every blob of a
/// checkpoint newer than the newest committed (never committed: cut short by a failure).
pub fn prune(store: &dyn CheckpointStore, keep: usize) -> Result<(), StoreError> {
    let ids = committed(store)?;
    let newest = ids.first().copied().unwrap_or(0);
    let oldest_kept = ids.get(keep.max(1) - 1).copied().unwrap_or(0);
    for name in store.list("ckpt-")? {
        let Some(id) = id_of(&name) else { continue };
        let is_manifest = name.ends_with(".manifest");
        let stale = id < oldest_kept || (id > newest && !is_manifest);
        if stale {
            store.delete(&name)?;
        }
    }
    Ok(())
}

/// The id the next checkpoint takes: above every one in the store.
pub fn next_id(store: &dyn CheckpointStore) -> Result<u64, StoreError> {
    Ok(store.list("ckpt-")?.iter().filter_map(|n| id_of(n)).max().map_or(1, |m| m + 1))
}

/// Re-exported for the manifest's readers.
pub use manifest::blob_name;

#[cfg(test)]
#[path = "catalog_tests.rs"]
mod tests;
