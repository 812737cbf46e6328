//! Ledger mode in production with real processes: three ledger-mode brokers
//! with 256 KiB ledger files, a 4 s `fileReservedTimeMillis` and every hour
//! a `deleteWhen` hour. Messages are produced across many ledger files; the
//! old files go on every member while every retained message stays
//! readable; `basalt admin ledger status` shows the live group (table and
//! JSON); `basalt admin ledger transfer` moves leadership and the new leader
//! takes sends; a delay level configured to 2 s (the default level 2 is 5 s)
//! is honoured. A follower stopped while the old files went is brought back
//! from the leader's first kept entry.

use crate::procs;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use basalt_client::{
    Admin, ClientConfig, Message, Producer, ProducerOptions, PullConsumer, PullStatus, SendStatus,
};
use procs::eventually;
use procs::ledger_group::LedgerGroup;

const TOPIC: &str = "LedgerRetention";
const FILE: u64 = 256 * 1024;

fn client_config(ns: &str) -> ClientConfig {
    let mut c = ClientConfig::new(ns);
    c.poll_name_server_interval = Duration::from_millis(300);
    c.request_timeout = Duration::from_secs(5);
    c
}

/// `basalt admin ARGS` against the NameServer; its stdout, or a panic with
/// what it printed.
fn admin_cli(ns: &str, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .arg("admin")
        .arg("--namesrv")
        .arg(ns)
        .args(args)
        .output()
        .expect("run basalt admin");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "basalt admin {args:?} failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The ledger data files of member `i`, by start position.
fn data_files(work: &Path, i: usize) -> Vec<u64> {
    let dir = work
        .join(format!("store{i}"))
        .join(format!("dledger-n{i}"))
        .join("data");
    let mut v: Vec<u64> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    v.sort();
    v
}

/// The group status as `basalt admin ledger status --json` prints it.
fn status_json(ns: &str) -> serde_json::Value {
    let out = admin_cli(ns, &["ledger", "status", "-c", "LC", "--json"]);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// (member id, role, term) of every member that answered.
fn members(status: &serde_json::Value) -> Vec<(String, String, i64)> {
    status[0]["members"]
        .as_array()
        .expect("members")
        .iter()
        .filter_map(|m| {
            let s = m.get("status")?;
            Some((
                s["selfId"].as_str()?.to_string(),
                s["role"].as_str()?.to_string(),
                s["term"].as_i64()?,
            ))
        })
        .collect()
}

/// Pulls every message of queue `q` from `from` to `to`, checking each body
/// and that queue offsets come in order; returns how many it read.
/// Retention keeps deleting expired files while the test reads, and a pull
/// passes over messages whose data went (as RocketMQ's does: the next found
/// message is returned); such a jump is allowed only if the queue's min
/// offset then moves past the messages passed over.
async fn read_range(pc: &PullConsumer, q: &basalt_client::TopicQueue, from: i64, to: i64) -> i64 {
    let mut offset = from;
    let mut read = 0;
    let mut passed_over_until = None;
    while offset < to {
        let r = pc
            .pull(q, "*", offset, 32, Duration::from_secs(5))
            .await
            .expect("pull");
        if r.status != PullStatus::Found && r.next_begin_offset > offset {
            // The offset fell below the new min, or every message the pull
            // scanned was being removed: go on where the broker says.
            passed_over_until = Some(r.next_begin_offset);
            offset = r.next_begin_offset;
            continue;
        }
        assert_eq!(
            r.status,
            PullStatus::Found,
            "queue {} at {offset}",
            q.queue_id
        );
        for m in &r.msgs {
            assert!(
                m.queue_offset >= offset,
                "queue {}: offset {} after {offset}",
                q.queue_id,
                m.queue_offset
            );
            if m.queue_offset > offset {
                passed_over_until = Some(m.queue_offset);
            }
            assert!(
                m.body.starts_with(b"m-"),
                "body of offset {}",
                m.queue_offset
            );
            offset = m.queue_offset + 1;
            read += 1;
        }
    }
    if let Some(until) = passed_over_until {
        eventually(
            "the queue's min offset past the messages retention removed mid-read",
            Duration::from_secs(10),
            async || pc.min_offset(q).await.is_ok_and(|m| m >= until),
        )
        .await;
    }
    read
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_retention_status_transfer_and_delay_levels() {
    let work = tempfile::tempdir().unwrap();
    let every_hour = (0..24)
        .map(|h| format!("{h:02}"))
        .collect::<Vec<_>>()
        .join(";");
    let group = LedgerGroup::start(
        work.path(),
        &[
            format!("mappedFileSizeCommitLog={FILE}"),
            "maxMessageSize=16384".into(),
            "fileReservedTimeMillis=4000".into(),
            format!("deleteWhen={every_hour}"),
            "cleanResourceInterval=500".into(),
            "messageDelayLevel=1s 2s 3s".into(),
        ],
    );
    let ns = group.ns_addr.clone();
    let admin = Admin::new(client_config(&ns));
    let master = group.master(&admin, None).await;
    group.create_topic(&admin, &master, TOPIC, 2).await;

    // ~2 MiB of 1 KiB messages: about eight ledger files.
    let opts = ProducerOptions {
        retry_times_when_send_failed: 2,
        ..Default::default()
    };
    let producer = Producer::with_options("lo-producer", client_config(&ns), opts);
    producer.start().await.unwrap();
    let mut body = vec![b'x'; 1000];
    for k in 0..2000u32 {
        body[..2].copy_from_slice(b"m-");
        body[2..10].copy_from_slice(format!("{k:08}").as_bytes());
        let r = producer
            .send(&Message::new(TOPIC, body.clone()))
            .await
            .expect("send");
        assert_eq!(r.status, SendStatus::SendOk);
    }
    // (Files may already be going while the sends run: the newest file's
    // position shows how many the ledger went through.)
    for i in 0..3 {
        let newest = data_files(work.path(), i).last().copied().unwrap_or(0);
        assert!(
            newest >= 5 * FILE,
            "member {i} rolled over several files (newest at {newest})"
        );
    }

    // Past the reserved time the old files go on every member; the newest
    // stays and nothing committed after them is lost.
    eventually(
        "old ledger files deleted on every member",
        Duration::from_secs(30),
        async || {
            (0..3).all(|i| {
                let f = data_files(work.path(), i);
                f.first().is_some_and(|s| *s >= 4 * FILE)
            })
        },
    )
    .await;

    // Every retained message is readable, from each queue's new min offset.
    let pc = PullConsumer::new("lo-reader", client_config(&ns));
    pc.start().await.unwrap();
    let mut retained = 0;
    for q in pc.fetch_queues(TOPIC).await.unwrap() {
        let (min, max) = (
            pc.min_offset(&q).await.unwrap(),
            pc.max_offset(&q).await.unwrap(),
        );
        assert!(
            min > 0,
            "queue {}: min offset moved past the deleted files",
            q.queue_id
        );
        retained += read_range(&pc, &q, min, max).await;
    }
    assert!(
        retained > 0 && retained < 2000,
        "retained {retained} of 2000"
    );

    // `admin ledger status`: one leader, two followers, one term; the
    // leader reports each follower's match index and lag.
    let st = status_json(&ns);
    let m = members(&st);
    assert_eq!(m.len(), 3, "{st}");
    assert_eq!(
        m.iter().filter(|(_, r, _)| r == "LEADER").count(),
        1,
        "{st}"
    );
    assert!(m.iter().all(|(_, _, t)| *t == m[0].2), "one term: {st}");
    let leader_id = m.iter().find(|(_, r, _)| r == "LEADER").unwrap().0.clone();
    let leader_status = st[0]["members"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["status"]["role"] == "LEADER")
        .unwrap()["status"]
        .clone();
    assert!(
        leader_status["beginIndex"].as_i64().unwrap() > 0,
        "{leader_status}"
    );
    let peers = leader_status["peers"].as_array().unwrap();
    assert_eq!(peers.len(), 3);
    assert!(
        peers
            .iter()
            .all(|p| p["lag"].as_i64().is_some_and(|l| l >= 0)),
        "{leader_status}"
    );
    let table = admin_cli(&ns, &["ledger", "status", "-c", "LC"]);
    assert!(
        table.contains("LEADER") && table.contains("FOLLOWER"),
        "{table}"
    );
    assert!(table.contains(&format!("leader {leader_id}")), "{table}");
    let cluster = admin_cli(&ns, &["cluster"]);
    assert!(
        cluster.contains(&format!("leader {leader_id}")),
        "{cluster}"
    );

    // `admin ledger transfer`: leadership moves to a follower, which then
    // takes sends as master.
    let to = m.iter().find(|(_, r, _)| r != "LEADER").unwrap().0.clone();
    let out = admin_cli(&ns, &["ledger", "transfer", "--to", &to, "-c", "LC"]);
    assert!(out.contains(&format!("to {to}")), "{out}");
    let st = status_json(&ns);
    let now = members(&st);
    assert!(
        now.iter()
            .any(|(id, r, t)| *id == to && r == "LEADER" && *t > m[0].2),
        "{st}"
    );
    let new_master = group.master(&admin, Some(&master)).await;
    eventually(
        "sends to the new leader",
        Duration::from_secs(30),
        async || {
            producer
                .send(&Message::new(TOPIC, &b"m-after-transfer"[..]))
                .await
                .is_ok_and(|r| r.status == SendStatus::SendOk)
        },
    )
    .await;
    assert_ne!(new_master, master);

    // Delay level 2 is configured to 2 s (5 s by default): the message
    // appears in its topic after about 2 s.
    let delayed_topic = "LedgerDelayed";
    group
        .create_topic(&admin, &new_master, delayed_topic, 1)
        .await;
    let sent_at = Instant::now();
    let r = producer
        .send(&Message::new(delayed_topic, &b"m-delayed"[..]).with_delay_level(2))
        .await
        .unwrap();
    assert_eq!(r.status, SendStatus::SendOk);
    let q = pc.fetch_queues(delayed_topic).await.unwrap()[0].clone();
    let mut arrived = None;
    while sent_at.elapsed() < Duration::from_secs(20) {
        let r = pc
            .pull(&q, "*", 0, 1, Duration::from_secs(5))
            .await
            .unwrap();
        if r.status == PullStatus::Found {
            arrived = Some(sent_at.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let took = arrived.expect("the delayed message arrives");
    assert!(
        took >= Duration::from_millis(1500) && took < Duration::from_millis(4500),
        "delay level 2 (2 s here, 5 s by default) took {took:?}"
    );

    producer.shutdown().await;
    pc.shutdown().await;
    admin.shutdown();
}

/// The group status of member `id` as `admin ledger status --json` shows it.
fn member_status(st: &serde_json::Value, id: &str) -> Option<serde_json::Value> {
    st[0]["members"]
        .as_array()?
        .iter()
        .find(|m| m["status"]["selfId"] == id)
        .map(|m| m["status"].clone())
}

/// A follower stopped while the group wrote several files and deleted the old
/// ones comes back behind the leader's first kept entry: the leader brings it
/// back from that entry (a TRUNCATE there, then APPENDs), and it can lead and
/// serve every retained message afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_follower_behind_the_first_kept_entry_is_brought_back() {
    let work = tempfile::tempdir().unwrap();
    let every_hour = (0..24)
        .map(|h| format!("{h:02}"))
        .collect::<Vec<_>>()
        .join(";");
    let mut group = LedgerGroup::start(
        work.path(),
        &[
            format!("mappedFileSizeCommitLog={FILE}"),
            "maxMessageSize=16384".into(),
            "fileReservedTimeMillis=3000".into(),
            format!("deleteWhen={every_hour}"),
            "cleanResourceInterval=500".into(),
        ],
    );
    let ns = group.ns_addr.clone();
    let admin = Admin::new(client_config(&ns));
    let master = group.master(&admin, None).await;
    group.create_topic(&admin, &master, TOPIC, 2).await;
    let st = status_json(&ns);
    let (away, _, _) = members(&st)
        .into_iter()
        .find(|(_, r, _)| r == "FOLLOWER")
        .expect("a follower");
    let k: usize = away[1..].parse().expect("member ids are nK");
    group.stop_member(k);

    let producer = Producer::with_options(
        "lo-behind",
        client_config(&ns),
        ProducerOptions {
            retry_times_when_send_failed: 2,
            ..Default::default()
        },
    );
    producer.start().await.unwrap();
    let mut body = vec![b'x'; 1000];
    for n in 0..2000u32 {
        body[..2].copy_from_slice(b"m-");
        body[2..10].copy_from_slice(format!("{n:08}").as_bytes());
        let r = producer
            .send(&Message::new(TOPIC, body.clone()))
            .await
            .expect("send");
        assert_eq!(r.status, SendStatus::SendOk);
    }
    let others: Vec<usize> = (0..3).filter(|i| *i != k).collect();
    eventually(
        "old ledger files deleted on the running members",
        Duration::from_secs(30),
        async || {
            others.iter().all(|i| {
                data_files(work.path(), *i)
                    .first()
                    .is_some_and(|s| *s >= 4 * FILE)
            })
        },
    )
    .await;
    // The stopped member's log ends before the leader's first kept byte.
    let kept_from = others
        .iter()
        .map(|i| data_files(work.path(), *i)[0])
        .min()
        .unwrap();
    // (Its files are no guide: members create data files ahead of the writer.)
    let away_dir = work
        .path()
        .join(format!("store{k}"))
        .join(format!("dledger-n{k}"));
    let report = basalt_ledger::check_ledger_dir(&away_dir).expect("check the stopped member");
    assert!(report.is_ok(), "{report}");
    assert!(
        report.end_pos <= kept_from as i64,
        "member {k} ends at {} before the first kept file at {kept_from}",
        report.end_pos
    );

    group.restart_member(k);
    eventually(
        "the member is back, level with the leader",
        Duration::from_secs(30),
        async || {
            let st = status_json(&ns);
            let (Some(me), Some(leader)) = (
                member_status(&st, &away),
                st[0]["members"]
                    .as_array()
                    .and_then(|m| m.iter().find(|m| m["status"]["role"] == "LEADER"))
                    .map(|m| m["status"].clone()),
            ) else {
                return false;
            };
            me["role"] == "FOLLOWER"
                && me["endIndex"] == leader["endIndex"]
                && me["committedIndex"] == leader["committedIndex"]
                && me["beginIndex"].as_i64() >= leader["beginIndex"].as_i64()
                && me["beginIndex"].as_i64().is_some_and(|b| b > 0)
        },
    )
    .await;

    // It leads and serves every retained message from its own ledger.
    let out = admin_cli(&ns, &["ledger", "transfer", "--to", &away, "-c", "LC"]);
    assert!(out.contains(&format!("to {away}")), "{out}");
    let _ = group.master(&admin, Some(&master)).await;
    let pc = PullConsumer::new("lo-behind-reader", client_config(&ns));
    pc.start().await.unwrap();
    let mut retained = 0;
    for q in pc.fetch_queues(TOPIC).await.unwrap() {
        let (min, max) = (
            pc.min_offset(&q).await.unwrap(),
            pc.max_offset(&q).await.unwrap(),
        );
        retained += read_range(&pc, &q, min, max).await;
    }
    assert!(
        retained > 0 && retained < 2000,
        "retained {retained} of 2000"
    );
    producer.shutdown().await;
    pc.shutdown().await;
    admin.shutdown();
}
