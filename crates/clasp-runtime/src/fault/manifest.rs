//! A checkpoint's manifest: what it holds and where (the key groups' blobs with their
//! checksums, the sources' positions, the placement and key assignment, the output's committed
//! length), written by the planner last, so a checkpoint exists once its manifest does.
//!
//! On disk: a header line `clasp-checkpoint 1 CRC32` then the JSON body, the checksum over the
//! body, so a truncated or altered manifest is noticed.

use crate::wire::BlobIndex;
use clasp_core::Pipeline;
use clasp_core::placement::{KeyAssignment, Placement};
use clasp_core::source::SourcePosition;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The manifest format written.
pub const FORMAT: u32 = 1;
const MAGIC: &str = "clasp-checkpoint";

/// The name of checkpoint `id`'s manifest in the store.
pub fn manifest_name(id: u64) -> String {
    format!("ckpt-{id:08}.manifest")
}

/// The name of worker `w`'s blob of checkpoint `id`.
pub fn blob_name(id: u64, w: clasp_core::WorkerId) -> String {
    format!("ckpt-{id:08}.w{}", w.0)
}

/// The checkpoint id a store name belongs to.
pub fn id_of(name: &str) -> Option<u64> {
    name.strip_prefix("ckpt-")?.split('.').next()?.parse().ok()
}

/// One source's replay point.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceMark {
    /// The source's name.
    pub source: String,
    /// Its position after the last input before the boundary (`None`: nothing read yet).
    pub position: Option<SourcePosition>,
    /// Its watermark there (`None`: no event time read yet).
    #[serde(default)]
    pub watermark: Option<u64>,
}

/// The output file at a commit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputCommit {
    /// The output file.
    pub path: PathBuf,
    /// The segment the commit appends.
    pub segment: PathBuf,
    /// The file's length before it.
    pub bytes_before: u64,
    /// And after.
    pub bytes_after: u64,
}

/// Everything a committed checkpoint holds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`FORMAT`].
    pub format: u32,
    /// The checkpoint's number (increasing over the job's life, resumes included).
    pub id: u64,
    /// The pipeline's name.
    pub pipeline: String,
    /// [`fingerprint`] of the pipeline.
    pub fingerprint: u32,
    /// Key groups per keyed operator.
    pub key_groups: u32,
    /// The routing epoch at the boundary.
    pub epoch: u64,
    /// Input requests dispatched before the boundary (this run and the runs it resumed).
    pub requests: u64,
    /// Every source's replay point.
    pub sources: Vec<SourceMark>,
    /// The placement at the boundary.
    pub placement: Placement,
    /// The key assignment at the boundary.
    pub keys: KeyAssignment,
    /// The workers' blobs.
    pub blobs: Vec<BlobIndex>,
    /// The output at the commit.
    pub output: Option<OutputCommit>,
    /// Whether every input had been read and processed (a finished job).
    pub finished: bool,
}

/// Why a manifest cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// Not a manifest, or cut short.
    #[error("not a checkpoint manifest (bad header)")]
    Header,
    /// The checksum does not match: altered or truncated.
    #[error(
        "checksum mismatch: stored {stored:08x}, computed {computed:08x} (corrupt or truncated)"
    )]
    Checksum {
        /// In the header.
        stored: u32,
        /// Over the body.
        computed: u32,
    },
    /// A format this build does not read.
    #[error("format {0}; this clasp reads format {FORMAT}")]
    Format(u32),
    /// The body is not a manifest.
    #[error("its body is not a manifest: {0}")]
    Body(#[source] serde_json::Error),
}

impl Manifest {
    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        let body = serde_json::to_vec(self).expect("a manifest serializes");
        let mut out = format!("{MAGIC} {FORMAT} {:08x}\n", crc32fast::hash(&body)).into_bytes();
        out.extend_from_slice(&body);
        out
    }

    /// Reads a stored manifest, checking its checksum.
    pub fn decode(bytes: &[u8]) -> Result<Self, ManifestError> {
        let nl = bytes.iter().position(|b| *b == b'\n').ok_or(ManifestError::Header)?;
        let header = std::str::from_utf8(&bytes[..nl]).map_err(|_| ManifestError::Header)?;
        let mut parts = header.split(' ');
        let (Some(MAGIC), Some(format), Some(crc), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(ManifestError::Header);
        };
        let format: u32 = format.parse().map_err(|_| ManifestError::Header)?;
        let stored = u32::from_str_radix(crc, 16).map_err(|_| ManifestError::Header)?;
        let body = &bytes[nl + 1..];
        let computed = crc32fast::hash(body);
        if stored != computed {
            return Err(ManifestError::Checksum { stored, computed });
        }
        if format != FORMAT {
            return Err(ManifestError::Format(format));
        }
        serde_json::from_slice(body).map_err(ManifestError::Body)
    }
}

/// What makes two pipelines the same job for a checkpoint: the name, the operators (names,
/// kinds, statefulness), the streams and the sources. Service times, rates and parameters may
/// differ between a run and its resume.
pub fn fingerprint(p: &Pipeline) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(p.name.as_bytes());
    for o in &p.operators {
        h.update(format!("|op {} {:?} {}", o.name, o.kind, o.stateful).as_bytes());
    }
    for s in &p.streams {
        h.update(format!("|stream {:?}->{:?}", s.from, s.to).as_bytes());
    }
    for s in &p.sources {
        h.update(format!("|source {}", s.name).as_bytes());
    }
    h.finalize()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        let p = clasp_apps::pipeline("wc").unwrap();
        let placement = Placement::single_worker(&p, &[]);
        Manifest {
            format: FORMAT,
            id: 7,
            pipeline: p.name.clone(),
            fingerprint: fingerprint(&p),
            key_groups: 16,
            epoch: 3,
            requests: 100,
            sources: vec![SourceMark {
                source: "lines".into(),
                position: Some(SourcePosition::at(42)),
                watermark: Some(7),
            }],
            keys: KeyAssignment { groups: 16, owners: vec![Vec::new(); p.operators.len()] },
            placement,
            blobs: Vec::new(),
            output: None,
            finished: false,
        }
    }

    #[test]
    fn a_manifest_round_trips_and_any_damage_is_detected() {
        let m = manifest();
        let bytes = m.encode();
        assert_eq!(Manifest::decode(&bytes).unwrap(), m);
        for cut in [0, 5, bytes.len() / 2, bytes.len() - 1] {
            assert!(Manifest::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for at in [3, 30, bytes.len() / 2, bytes.len() - 2] {
            let mut flipped = bytes.clone();
            flipped[at] ^= 0x20;
            assert!(Manifest::decode(&flipped).is_err(), "flip at {at}");
        }
    }

    #[test]
    fn names_carry_their_checkpoint_id() {
        assert_eq!(id_of(&manifest_name(12)), Some(12));
        assert_eq!(id_of(&blob_name(12, clasp_core::WorkerId(3))), Some(12));
        assert_eq!(id_of("other"), None);
        let wc = clasp_apps::pipeline("wc").unwrap();
        let sd = clasp_apps::pipeline("sd").unwrap();
        assert_eq!(fingerprint(&wc), fingerprint(&wc.clone()));
        assert_ne!(fingerprint(&wc), fingerprint(&sd));
    }
}
