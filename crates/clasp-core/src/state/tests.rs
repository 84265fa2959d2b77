//! Keyed state: key comparison, group export and import, staging, snapshots, timers and dumps.

use super::*;
use crate::batch::Batch;

#[test]
fn short_and_long_keys_compare_exactly() {
    let keys: [&[u8]; 7] =
        [b"", b"a", b"ab", b"abcdefgh", b"abcdefghi", b"abcdefghijklmnop", b"abcdefghijklmnopq"];
    for a in keys {
        for b in keys {
            assert_eq!(same_key(1, a, 1, b), a == b, "{a:?} {b:?}");
        }
    }
    assert!(!same_key(1, b"a\0", 1, b"a"), "length counts");
    assert!(!same_key(1, b"x", 2, b"x"), "hashes differ");
}

#[test]
fn export_import_moves_a_group_exactly() {
    let groups = 8;
    let src: KeyedStore<u64> = KeyedStore::new(groups);
    let dst: KeyedStore<u64> = KeyedStore::new(groups);
    let mut b = Batch::new();
    for i in 0..1000u32 {
        b.push(format!("key{i}").as_bytes(), b"");
    }
    let mut acc = StateAccess::new(&src);
    for r in b.iter() {
        *acc.get_mut(r) += 2;
    }
    drop(acc);
    assert_eq!(src.key_count(), 1000);
    let mut moved = 0;
    for g in 0..groups {
        let mut bytes = Vec::new();
        let n = src.export_group(KeyGroup(g), &mut bytes).unwrap();
        assert_eq!(dst.import_group(KeyGroup(g), &bytes).unwrap(), n);
        moved += n;
    }
    assert_eq!((moved, src.key_count(), dst.key_count()), (1000, 0, 1000));
    let mut acc = StateAccess::new(&dst);
    assert!(b.iter().all(|r| acc.get(r).copied() == Some(2)));
}

#[test]
fn import_rejects_keys_of_another_group_and_garbage() {
    let s: KeyedStore<u64> = KeyedStore::new(4);
    let mut b = Batch::new();
    b.push(b"x", b"");
    let g = key_group(b.get(0).hash, 4);
    *StateAccess::new(&s).get_mut(b.get(0)) = 5;
    let mut bytes = Vec::new();
    s.export_group(g, &mut bytes).unwrap();
    let other = KeyGroup((g.0 + 1) % 4);
    assert!(matches!(s.import_group(other, &bytes), Err(StateError::WrongGroup { .. })));
    assert!(matches!(s.import_group(g, &[0xff, 0xff]), Err(StateError::Decode { .. })));
}

#[test]
fn staged_groups_are_decoded_on_first_access_or_on_import() {
    let src: KeyedStore<u64> = KeyedStore::new(2);
    let dst: KeyedStore<u64> = KeyedStore::new(2);
    let b: Batch = (0..100u32)
        .map(|i| format!("k{i}"))
        .collect::<Vec<_>>()
        .iter()
        .map(|k| (k.as_bytes(), &b""[..]))
        .collect();
    let mut acc = StateAccess::new(&src);
    for r in b.iter() {
        *acc.get_mut(r) += 7;
    }
    drop(acc);
    for g in 0..2 {
        let detached = src.detach_group(KeyGroup(g));
        let keys = detached.keys();
        let mut bytes = Vec::new();
        assert_eq!(detached.encode(KeyGroup(g), &mut bytes).unwrap(), keys);
        dst.stage_group(KeyGroup(g), bytes, keys);
    }
    assert_eq!((src.key_count(), dst.key_count()), (0, 100), "staged keys count before decoding");
    // Group of the first record: decoded by the executor's access.
    let mut acc = StateAccess::new(&dst);
    assert_eq!(acc.get(b.get(0)).copied(), Some(7));
    drop(acc);
    let g0 = key_group(b.get(0).hash, 2);
    assert_eq!(dst.import_staged(g0).unwrap(), 0, "already decoded");
    let other = KeyGroup(1 - g0.0);
    assert!(dst.import_staged(other).unwrap() > 0);
    // A corrupt staged group fails on access and the failure is reported on import.
    dst.stage_group(other, vec![0xff, 0xff, 0xff], 1);
    let _ = dst.key_count();
    assert!(matches!(dst.import_staged(other), Err(StateError::Decode { .. })));
}

#[test]
fn an_import_racing_executions_loses_no_update() {
    // Every group staged with 100 keys at 7, some holding entries already; one thread
    // imports them while another adds 1 to each key twice: every key ends at exactly 9 (or
    // 2 for keys that were only held locally), however the two interleave.
    let groups = 64;
    let src: KeyedStore<u64> = KeyedStore::new(groups);
    let dst: KeyedStore<u64> = KeyedStore::new(groups);
    let moved: Vec<String> = (0..6_400u32).map(|i| format!("moved{i}")).collect();
    let local: Vec<String> = (0..640u32).map(|i| format!("local{i}")).collect();
    let batch =
        |keys: &[String]| -> Batch { keys.iter().map(|k| (k.as_bytes(), &b""[..])).collect() };
    let (moved_b, local_b) = (batch(&moved), batch(&local));
    let mut acc = StateAccess::new(&src);
    for r in moved_b.iter() {
        *acc.get_mut(r) += 7;
    }
    drop(acc);
    for g in 0..groups {
        let detached = src.detach_group(KeyGroup(g));
        let mut bytes = Vec::new();
        let keys = detached.encode(KeyGroup(g), &mut bytes).unwrap();
        if g.is_multiple_of(2) {
            // A group with entries of its own before its staged ones are decoded.
            let mut acc = StateAccess::new(&dst);
            for r in local_b.iter().filter(|r| key_group(r.hash, groups) == KeyGroup(g)) {
                *acc.get_mut(r) += 1;
            }
        }
        dst.stage_group(KeyGroup(g), bytes, keys);
    }
    std::thread::scope(|scope| {
        scope.spawn(|| {
            for g in 0..groups {
                dst.import_staged(KeyGroup(g)).unwrap();
            }
        });
        for _ in 0..2 {
            let mut acc = StateAccess::new(&dst);
            for r in moved_b.iter() {
                *acc.get_mut(r) += 1;
            }
        }
    });
    let mut acc = StateAccess::new(&dst);
    for r in moved_b.iter() {
        assert_eq!(acc.get(r).copied(), Some(9), "{:?}", String::from_utf8_lossy(r.key));
    }
    for r in local_b.iter() {
        let even = key_group(r.hash, groups).0.is_multiple_of(2);
        assert_eq!(acc.get(r).copied(), even.then_some(1));
    }
    drop(acc);
    let local_even =
        local_b.iter().filter(|r| key_group(r.hash, groups).0.is_multiple_of(2)).count();
    assert_eq!(dst.key_count(), moved.len() + local_even);
}

#[test]
fn a_snapshot_holds_the_groups_as_they_were_when_marked() {
    let groups = 16;
    let s: KeyedStore<u64> = KeyedStore::new(groups);
    let b: Batch = (0..2000u32)
        .map(|i| format!("k{i}"))
        .collect::<Vec<_>>()
        .iter()
        .map(|k| (k.as_bytes(), &b""[..]))
        .collect();
    let mut acc = StateAccess::new(&s);
    for r in b.iter() {
        *acc.get_mut(r) += 1;
    }
    drop(acc);
    let all: Vec<KeyGroup> = (0..groups).map(KeyGroup).collect();
    let snap = s.mark_snapshot(all.clone());
    // Changes after the mark: every key twice more; half the groups are encoded first by
    // these changes (copy on write), the rest by the writer afterwards.
    let mut acc = StateAccess::new(&s);
    for r in b.iter().filter(|r| key_group(r.hash, groups).0.is_multiple_of(2)) {
        *acc.get_mut(r) += 2;
    }
    drop(acc);
    let restored: KeyedStore<u64> = KeyedStore::new(groups);
    let mut keys = 0;
    for (slot, &g) in all.iter().enumerate() {
        s.snapshot_group(g);
        let e = snap.take(slot).expect("every marked group is encoded").unwrap();
        keys += e.keys;
        restored.import_group(g, &e.bytes).unwrap();
    }
    assert_eq!(keys, 2000);
    let mut acc = StateAccess::new(&restored);
    assert!(b.iter().all(|r| acc.get(r).copied() == Some(1)), "the marked values");
    let mut live = StateAccess::new(&s);
    let want = |r: &Record<'_>| if key_group(r.hash, groups).0.is_multiple_of(2) { 3 } else { 1 };
    assert!(b.iter().all(|r| live.get(r).copied() == Some(want(&r))), "changes kept");
    drop(live);
    s.clear();
    assert_eq!(s.key_count(), 0);
}

#[test]
fn timers_move_with_their_group() {
    let groups = 4;
    let src: KeyedStore<u64> = KeyedStore::new(groups);
    let dst: KeyedStore<u64> = KeyedStore::new(groups);
    let b: Batch = [(&b"a"[..], &b""[..]), (b"b", b""), (b"c", b"")].into_iter().collect();
    let mut acc = StateAccess::new(&src);
    for (i, r) in b.iter().enumerate() {
        *acc.get_mut(r) = i as u64;
        acc.timers(r.hash).set(TimeDomain::Event, 10 + i as u64, r.key);
        acc.timers(r.hash).set(TimeDomain::Processing, 99, r.key);
    }
    drop(acc);
    assert_eq!(src.timer_count(), 6);
    for g in 0..groups {
        let mut bytes = Vec::new();
        src.export_group(KeyGroup(g), &mut bytes).unwrap();
        dst.import_group(KeyGroup(g), &bytes).unwrap();
    }
    assert_eq!((src.timer_count(), dst.timer_count()), (0, 6));
    let mut due = Vec::new();
    for g in 0..groups {
        dst.take_due_timers(KeyGroup(g), TimeDomain::Event, 11, &mut due);
    }
    let mut keys: Vec<&[u8]> = due.iter().map(|(_, k)| &k[..]).collect();
    keys.sort();
    assert_eq!(keys, [&b"a"[..], b"b"]);
    assert_eq!(dst.timer_count(), 4);
    // A timer whose key belongs to another group is refused on import.
    let g = key_group(b.get(0).hash, groups);
    let mut foreign = TimerQueue::default();
    foreign.set(TimeDomain::Event, 1, b"a");
    let bytes = postcard::to_allocvec(&(Vec::<(Vec<u8>, u64)>::new(), foreign)).unwrap();
    let other = KeyGroup((g.0 + 1) % groups);
    assert!(matches!(dst.import_group(other, &bytes), Err(StateError::WrongGroup { .. })));
}

#[test]
fn dump_is_sorted_json_lines() {
    let s: KeyedStore<u64> = KeyedStore::new(4);
    let b: Batch = [(&b"b"[..], &b""[..]), (b"a", b""), (b"\xff", b"")].into_iter().collect();
    let mut acc = StateAccess::new(&s);
    for r in b.iter() {
        *acc.get_mut(r) += 1;
    }
    drop(acc);
    let mut out = Vec::new();
    assert_eq!(s.dump_json("count", &mut out).unwrap(), 3);
    let text = String::from_utf8(out).unwrap();
    assert_eq!(
        text,
        "{\"operator\":\"count\",\"key\":\"a\",\"value\":1}\n\
         {\"operator\":\"count\",\"key\":\"b\",\"value\":1}\n\
         {\"operator\":\"count\",\"key\":\"0xff\",\"value\":1}\n"
    );
}
