//! The same tests against every store: a directory here, and Redis when a server answers at
//! `CLASP_REDIS` (default `redis://127.0.0.1:6379`); with `CLASP_REQUIRE_REDIS=1` (CI) a
//! missing server fails the test instead of skipping it.

use super::{CheckpointStore, DirStore, RedisStore, StoreError, open};

/// The Redis store for a test under `prefix`, or `None` (skipped) when no server answers and
/// none is required.
pub(crate) fn redis_store(prefix: &str) -> Option<RedisStore> {
    let base = std::env::var("CLASP_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let location = format!("{}/{prefix}-{}", base.trim_end_matches('/'), std::process::id());
    match RedisStore::open(&location) {
        Ok(s) => Some(s),
        Err(e) if std::env::var("CLASP_REQUIRE_REDIS").is_ok_and(|v| v == "1") => {
            panic!("CLASP_REQUIRE_REDIS=1 but Redis is unreachable: {e}")
        }
        Err(e) => {
            eprintln!(
                "skipping the Redis store test: {e} (start redis-server, see scripts/setup.sh)"
            );
            None
        }
    }
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("clasp-store-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn blobs_round_trip(s: &dyn CheckpointStore) {
    for name in s.list("").unwrap() {
        s.delete(&name).unwrap();
    }
    assert_eq!(s.get("ckpt-1.w0").unwrap(), None);
    let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    s.put("ckpt-1.w0", &big).unwrap();
    s.put("ckpt-1.w1", b"").unwrap();
    s.put("ckpt-2.manifest", b"first").unwrap();
    s.put("ckpt-2.manifest", b"second").unwrap();
    s.put("other", b"x").unwrap();
    assert_eq!(s.get("ckpt-1.w0").unwrap().as_deref(), Some(&big[..]));
    assert_eq!(s.get("ckpt-1.w1").unwrap().as_deref(), Some(&b""[..]));
    assert_eq!(s.get("ckpt-2.manifest").unwrap().as_deref(), Some(&b"second"[..]));
    assert_eq!(s.list("ckpt-").unwrap(), ["ckpt-1.w0", "ckpt-1.w1", "ckpt-2.manifest"]);
    s.delete("ckpt-1.w0").unwrap();
    s.delete("ckpt-1.w0").unwrap();
    assert_eq!(s.list("ckpt-1").unwrap(), ["ckpt-1.w1"]);
    for bad in ["", "../x", "a/b", ".hidden", "sp ace"] {
        assert!(matches!(s.put(bad, b"x"), Err(StoreError::Spec { .. })), "{bad:?}");
    }
    for name in s.list("").unwrap() {
        s.delete(&name).unwrap();
    }
    assert!(s.list("").unwrap().is_empty());
}

#[test]
fn a_directory_store_keeps_blobs_whole() {
    let dir = temp_dir("dir");
    let s = DirStore::open(&dir).unwrap();
    blobs_round_trip(&s);
    let reopened = open(dir.to_str().unwrap()).unwrap();
    reopened.put("a", b"1").unwrap();
    assert_eq!(s.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_redis_store_keeps_blobs_whole() {
    let Some(s) = redis_store("store-test") else { return };
    blobs_round_trip(&s);
}

#[test]
fn an_unreachable_redis_fails_fast_naming_its_address() {
    // Port 1 on loopback: nothing listens there.
    let e = open("redis://127.0.0.1:1/x").unwrap_err();
    assert!(e.to_string().contains("127.0.0.1:1"), "{e}");
    let e = open("redis://nohostport").unwrap_err();
    assert!(e.to_string().contains("HOST:PORT"), "{e}");
    assert!(open("s3://bucket").unwrap_err().to_string().contains("redis://"));
}
