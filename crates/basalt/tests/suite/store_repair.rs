//! `basalt store repair` as an operator runs it: a store refused for damage
//! in the middle, a dry run that changes nothing, the repair with `--yes`,
//! then the store opens with exactly the prefix and `basalt store check`
//! passes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use basalt_common::record::RecordDraft;
use basalt_store::{MessageStore, StoreConfig, StoreError};

fn basalt(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(args)
        .output()
        .expect("run basalt")
}

fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

/// 200 messages in one queue; returns each record's (offset, end).
fn populate(dir: &Path) -> Vec<(i64, i64)> {
    let store = MessageStore::open(StoreConfig::for_tests(dir)).unwrap();
    let host = store.store_host();
    let born = "127.0.0.1:50000".parse().unwrap();
    let mut out = Vec::new();
    for i in 0..200usize {
        let body = vec![b'a' + (i % 26) as u8; 300 + i % 200];
        let d = RecordDraft {
            topic: "Cli",
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1_700_000_000_000,
            born_host: born,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: &body,
            properties: b"",
        };
        let a = store.put_message(&d).append.expect("put ok");
        out.push((a.wrote_offset, a.end_offset()));
    }
    store.shutdown();
    out
}

#[test]
fn repair_cli_dry_run_then_yes_leaves_the_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let written = populate(root);
    // Damage a record in the middle of the first file: later files hold
    // valid records.
    let (victim, _) = written[20];
    let first = root.join("commitlog").join(format!("{:020}", 0));
    let mut raw = std::fs::read(&first).unwrap();
    raw[victim as usize + 40] ^= 0x08;
    std::fs::write(&first, raw).unwrap();
    match MessageStore::open(StoreConfig::for_tests(root)) {
        Err(StoreError::MiddleCorruption { offset, .. }) => assert_eq!(offset, victim),
        other => panic!("expected MiddleCorruption, got {other:?}"),
    }
    let root_s = root.to_str().unwrap();
    let at = victim.to_string();

    let before = snapshot(root);
    let dry = basalt(&["store", "repair", root_s, "--truncate-at", &at]);
    let text = String::from_utf8_lossy(&dry.stdout);
    assert!(
        dry.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&dry.stderr)
    );
    assert!(text.contains("dry run: nothing changed"), "{text}");
    assert!(
        text.contains("180 units"),
        "the 180 units past the cut are listed:\n{text}"
    );
    assert_eq!(snapshot(root), before, "a dry run writes nothing");

    let bad = basalt(&[
        "store",
        "repair",
        root_s,
        "--truncate-at",
        &(victim + 1).to_string(),
        "--yes",
    ]);
    assert!(
        !bad.status.success(),
        "an offset inside a record is refused"
    );
    assert_eq!(snapshot(root), before);

    let done = basalt(&["store", "repair", root_s, "--truncate-at", &at, "--yes"]);
    let text = String::from_utf8_lossy(&done.stdout);
    assert!(
        done.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(text.contains("result      OK"), "{text}");

    let check = basalt(&["store", "check", root_s]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );

    let store = MessageStore::open(StoreConfig::for_tests(root)).unwrap();
    assert_eq!(store.commit_log().max_offset(), victim);
    assert_eq!(store.max_offset_in_queue("Cli", 0), 20);
    store.shutdown();
}
