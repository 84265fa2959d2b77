//! The catalog against both stores: the newest whole checkpoint is found, a damaged one
//! (bytes flipped, file cut) is passed over with a warning naming its file, another
//! pipeline's is refused, and retention keeps the newest committed ones.

use super::*;
use crate::fault::manifest::{FORMAT, SourceMark};
use crate::fault::store::tests::redis_store;
use crate::fault::store::{CheckpointStore, DirStore};
use crate::wire::{BlobIndex, GroupIndex};
use clasp_core::placement::{KeyAssignment, Placement};
use clasp_core::source::SourcePosition;
use clasp_core::{KeyGroup, OperatorId, WorkerId};

const GROUPS: u32 = 8;

fn wc() -> Pipeline {
    clasp_apps::pipeline("wc").unwrap()
}

/// Writes checkpoint `id` of `p`: one blob of `id`-dependent bytes, then the manifest.
fn write_checkpoint(s: &dyn CheckpointStore, p: &Pipeline, id: u64) {
    let bytes: Vec<u8> = (0..1000u64).map(|i| (i * id % 251) as u8).collect();
    let name = blob_name(id, WorkerId(0));
    s.put(&name, &bytes).unwrap();
    let blob = BlobIndex {
        name,
        worker: WorkerId(0),
        bytes: bytes.len() as u64,
        crc32: crc32fast::hash(&bytes),
        groups: vec![GroupIndex {
            op: OperatorId(1),
            group: KeyGroup(0),
            offset: 0,
            len: bytes.len() as u64,
            keys: 10,
            crc32: crc32fast::hash(&bytes),
        }],
    };
    let m = Manifest {
        format: FORMAT,
        id,
        pipeline: p.name.clone(),
        fingerprint: fingerprint(p),
        key_groups: GROUPS,
        epoch: id,
        requests: id * 100,
        sources: vec![SourceMark {
            source: "lines".into(),
            position: Some(SourcePosition::at(id)),
            watermark: None,
        }],
        placement: Placement::single_worker(p, &[]),
        keys: KeyAssignment {
            groups: GROUPS,
            owners: vec![vec![WorkerId(0); GROUPS as usize]; p.operators.len()],
        },
        blobs: vec![blob],
        output: None,
        finished: false,
    };
    s.put(&manifest_name(id), &m.encode()).unwrap();
}

fn clear(s: &dyn CheckpointStore) {
    for name in s.list("").unwrap() {
        s.delete(&name).unwrap();
    }
}

fn latest_id(s: &dyn CheckpointStore) -> (Option<u64>, Vec<String>) {
    let found = latest(s, &wc(), GROUPS).unwrap();
    (found.manifest.map(|m| m.id), found.warnings)
}

fn damage_is_passed_over(s: &dyn CheckpointStore) {
    clear(s);
    let p = wc();
    assert_eq!(latest_id(s).0, None);
    for id in 1..=3 {
        write_checkpoint(s, &p, id);
    }
    assert_eq!(latest_id(s), (Some(3), Vec::new()));

    // A flipped byte in checkpoint 3's blob.
    let blob = blob_name(3, WorkerId(0));
    let mut bytes = s.get(&blob).unwrap().unwrap();
    bytes[500] ^= 0x01;
    s.put(&blob, &bytes).unwrap();
    let (id, warnings) = latest_id(s);
    assert_eq!(id, Some(2));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains(&blob) && warnings[0].contains("corrupt"), "{warnings:?}");

    // Checkpoint 2's manifest cut short.
    let manifest = manifest_name(2);
    let bytes = s.get(&manifest).unwrap().unwrap();
    s.put(&manifest, &bytes[..bytes.len() - 7]).unwrap();
    let (id, warnings) = latest_id(s);
    assert_eq!(id, Some(1));
    assert!(warnings.iter().any(|w| w.contains(&manifest)), "{warnings:?}");

    // Checkpoint 1's blob cut short.
    let blob = blob_name(1, WorkerId(0));
    let bytes = s.get(&blob).unwrap().unwrap();
    s.put(&blob, &bytes[..10]).unwrap();
    let (id, warnings) = latest_id(s);
    assert_eq!(id, None);
    assert!(warnings.iter().any(|w| w.contains(&blob) && w.contains("truncated")), "{warnings:?}");
}

fn another_pipeline_is_refused(s: &dyn CheckpointStore) {
    clear(s);
    let sd = clasp_apps::pipeline("sd").unwrap();
    write_checkpoint(s, &sd, 1);
    let e = latest(s, &wc(), GROUPS).unwrap_err();
    assert!(matches!(e, CatalogError::OtherPipeline { .. }), "{e}");
    assert!(e.to_string().contains("`sd`") && e.to_string().contains("`wc`"), "{e}");
    let e = latest(s, &sd, GROUPS * 2).unwrap_err();
    assert!(e.to_string().contains(&format!("--key-groups {GROUPS}")), "{e}");
}

fn retention_keeps_the_newest(s: &dyn CheckpointStore) {
    clear(s);
    let p = wc();
    for id in 1..=5 {
        write_checkpoint(s, &p, id);
    }
    // Checkpoint 6 never committed: its blob alone.
    s.put(&blob_name(6, WorkerId(0)), b"partial").unwrap();
    assert_eq!(next_id(s).unwrap(), 7);
    prune(s, 2).unwrap();
    assert_eq!(committed(s).unwrap(), [5, 4]);
    let left = s.list("ckpt-").unwrap();
    assert_eq!(left.len(), 4, "{left:?}");
    assert!(left.iter().all(|n| id_of(n).is_some_and(|id| id == 4 || id == 5)), "{left:?}");
    clear(s);
}

fn every_case(s: &dyn CheckpointStore) {
    damage_is_passed_over(s);
    another_pipeline_is_refused(s);
    retention_keeps_the_newest(s);
}

#[test]
fn the_catalog_in_a_directory() {
    let dir = std::env::temp_dir().join(format!("clasp-catalog-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    every_case(&DirStore::open(&dir).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_catalog_in_redis() {
    let Some(s) = redis_store("catalog-test") else { return };
    every_case(&s);
}
