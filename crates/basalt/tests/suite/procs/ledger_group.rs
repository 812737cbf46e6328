//! [`LedgerGroup`]: a three-member ledger-mode broker group for process
//! tests.

use std::path::Path;
use std::time::Duration;

use basalt_client::{Admin, TopicConfig};
use basalt_remoting::code::{request, response};
use basalt_remoting::{ExtFields, RemotingClient, RemotingCommand};

use super::{Proc, eventually, free_port, free_port_pair, write_conf};

/// Three ledger-mode brokers (group `lb`, cluster `LC`) on 127.0.0.1 and
/// their NameServer; every process is killed when this is dropped.
pub struct LedgerGroup {
    _ns: Proc,
    pub ns_addr: String,
    brokers: Vec<Proc>,
    broker_ports: Vec<u16>,
    /// Each member's configuration file, to start it again.
    confs: Vec<std::path::PathBuf>,
    work: std::path::PathBuf,
}

impl LedgerGroup {
    /// Starts the group in `work` (stores and logs) with these extra
    /// `key=value` broker settings.
    pub fn start(work: &Path, settings: &[String]) -> LedgerGroup {
        let (ns, ns_addr) = Proc::namesrv(work);
        let ledger_ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
        let broker_ports: Vec<u16> = (0..3).map(|_| free_port_pair()).collect();
        let peers = (0..3)
            .map(|i| format!("n{i}-127.0.0.1:{}", ledger_ports[i]))
            .collect::<Vec<_>>()
            .join(";");
        let confs: Vec<std::path::PathBuf> = (0..3)
            .map(|i| {
                let store = work.join(format!("store{i}")).display().to_string();
                let mut pairs: Vec<(&str, String)> = vec![
                    ("brokerClusterName", "LC".into()),
                    ("brokerName", "lb".into()),
                    ("listenAddr", "127.0.0.1".into()),
                    ("brokerIP1", "127.0.0.1".into()),
                    ("brokerIP2", "127.0.0.1".into()),
                    ("listenPort", broker_ports[i].to_string()),
                    ("namesrvAddr", ns_addr.clone()),
                    ("storePathRootDir", store),
                    ("enableDLegerCommitLog", "true".into()),
                    ("dLegerGroup", "lb".into()),
                    ("dLegerPeers", peers.clone()),
                    ("dLegerSelfId", format!("n{i}")),
                    ("dLegerHeartbeatInterval", "200".into()),
                    ("mappedFileSizeCommitLog", (4 * 1024 * 1024).to_string()),
                    ("registerNameServerPeriod", "500".into()),
                    ("slaveSyncInterval", "500".into()),
                ];
                for kv in settings {
                    let (k, v) = kv.split_once('=').expect("key=value");
                    pairs.push((k, v.to_string()));
                }
                write_conf(work, &format!("b{i}"), &pairs)
            })
            .collect();
        let brokers = (0..3).map(|i| spawn_member(work, &confs, i)).collect();
        LedgerGroup {
            _ns: ns,
            ns_addr,
            brokers,
            broker_ports,
            confs,
            work: work.to_path_buf(),
        }
    }

    /// Stops member `i` cleanly (SIGTERM); its data stays.
    pub fn stop_member(&mut self, i: usize) {
        self.brokers[i].stop();
    }

    /// Starts member `i` again on its data and configuration.
    pub fn restart_member(&mut self, i: usize) {
        self.brokers[i] = spawn_member(&self.work, &self.confs, i);
    }

    /// The master's address once there is one other than `not`.
    pub async fn master(&self, admin: &Admin, not: Option<&str>) -> String {
        cluster_master(admin, "LC", not, Duration::from_secs(30)).await
    }

    /// Creates `topic` with `queues` queues on the master at `master` and
    /// waits until every member has it.
    pub async fn create_topic(&self, admin: &Admin, master: &str, topic: &str, queues: i32) {
        admin
            .create_topic(master, &TopicConfig::new(topic, queues))
            .await
            .expect("create topic");
        self.wait_topic_everywhere(topic).await;
    }

    /// Waits until every member has `topic` (followers copy the topic table
    /// from the leader every `slaveSyncInterval`; a member that never got a
    /// topic would not serve it after a fail-over).
    pub async fn wait_topic_everywhere(&self, topic: &str) {
        let client = RemotingClient::default();
        for port in &self.broker_ports {
            let addr = format!("127.0.0.1:{port}");
            eventually(
                &format!("{topic} on {addr}"),
                Duration::from_secs(10),
                async || has_topic_config(&client, &addr, topic).await,
            )
            .await;
        }
    }

    /// Every member's remoting address.
    pub fn addrs(&self) -> Vec<String> {
        self.broker_ports
            .iter()
            .map(|p| format!("127.0.0.1:{p}"))
            .collect()
    }

    /// SIGKILL to the member listening at `addr`.
    pub fn kill9(&mut self, addr: &str) {
        let i = (0..3)
            .find(|i| addr.ends_with(&format!(":{}", self.broker_ports[*i])))
            .expect("the master is one of ours");
        self.brokers[i].kill9();
    }
}

fn spawn_member(work: &Path, confs: &[std::path::PathBuf], i: usize) -> Proc {
    Proc::spawn(
        &format!("broker{i}"),
        &["broker", "-c", confs[i].to_str().expect("utf-8 path")],
        "basalt broker",
        work,
    )
}

/// Per queue, the queue offsets of `received` (message id -> every
/// `(queue id, queue offset)` it was delivered at; ids grow in send order)
/// follow the order of sending, without gaps.
pub fn check_queue_order(received: &std::collections::HashMap<u64, Vec<(i32, i64)>>) {
    let mut by_queue: std::collections::BTreeMap<i32, Vec<(i64, u64)>> = Default::default();
    for (id, got) in received {
        by_queue.entry(got[0].0).or_default().push((got[0].1, *id));
    }
    for (q, mut v) in by_queue {
        v.sort();
        for w in v.windows(2) {
            assert!(
                w[0].1 < w[1].1,
                "queue {q}: id {} at offset {} after id {} at {}",
                w[1].1,
                w[1].0,
                w[0].1,
                w[0].0
            );
            assert_eq!(w[1].0, w[0].0 + 1, "queue {q}: offsets without gaps");
        }
    }
}

/// After a clean stop, the ledgers of members `store{i}/dledger-n{i}` under
/// `work` pass their check and hold the same bytes up to the same end.
pub fn check_ledgers_identical(work: &Path, members: usize) {
    let dirs: Vec<std::path::PathBuf> = (0..members)
        .map(|i| work.join(format!("store{i}")).join(format!("dledger-n{i}")))
        .collect();
    let reports: Vec<_> = dirs
        .iter()
        .map(|d| basalt_ledger::check_ledger_dir(d).unwrap())
        .collect();
    for (d, r) in dirs.iter().zip(&reports) {
        assert!(r.is_ok(), "{}: {r}", d.display());
        assert_eq!(
            (r.end_pos, r.last_index),
            (reports[0].end_pos, reports[0].last_index),
            "{} ends elsewhere",
            d.display()
        );
    }
    let data = |dir: &Path| {
        let mut files: Vec<_> = std::fs::read_dir(dir.join("data"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        let mut out = Vec::new();
        for f in files {
            out.extend(std::fs::read(f).unwrap());
        }
        out.truncate(reports[0].end_pos as usize);
        out
    };
    let first = data(&dirs[0]);
    for d in &dirs[1..] {
        assert!(data(d) == first, "ledger data of {} differs", d.display());
    }
}

/// The term of every entry in the ledger of `dir` (index -> term), read
/// from its data files up to `end_pos`.
fn ledger_terms(dir: &Path, end_pos: i64) -> std::collections::BTreeMap<i64, i64> {
    use basalt_ledger::entry::{EntryHeader, HEADER_SIZE};
    let mut files: Vec<(i64, std::path::PathBuf)> = std::fs::read_dir(dir.join("data"))
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            let start = p.file_name()?.to_str()?.parse::<i64>().ok()?;
            Some((start, p))
        })
        .collect();
    files.sort();
    let mut terms = std::collections::BTreeMap::new();
    for (start, path) in files {
        let bytes = std::fs::read(&path).unwrap();
        let mut at = 0usize;
        while start + (at as i64) < end_pos && at + HEADER_SIZE <= bytes.len() {
            // A blank (end of file) or never-written zeros end the file.
            let Ok(h) = EntryHeader::decode(&bytes[at..]) else {
                break;
            };
            assert_eq!(
                h.pos,
                start + at as i64,
                "{}: entry out of place",
                path.display()
            );
            terms.insert(h.index, h.term);
            at = (h.end_pos() - start) as usize;
        }
    }
    terms
}

/// Each member's `ledger-acks.log` (`ledgerAckLogEnable`) against the final
/// ledger, which [`check_ledgers_identical`] has shown all members share:
/// every index a member acknowledged holds an entry of the term it was
/// acknowledged in. A deposed leader that acknowledged an entry the new
/// term replaced would fail here. Returns the number of acknowledged
/// entries per term, over all members.
pub fn check_acks_hold_their_terms(
    work: &Path,
    members: usize,
) -> std::collections::BTreeMap<i64, usize> {
    let dir0 = work.join("store0").join("dledger-n0");
    let report = basalt_ledger::check_ledger_dir(&dir0).unwrap();
    let terms = ledger_terms(&dir0, report.end_pos);
    let mut per_term = std::collections::BTreeMap::new();
    for i in 0..members {
        let path = work.join(format!("store{i}")).join("ledger-acks.log");
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        for line in text.lines() {
            let f: Vec<i64> = line
                .strip_prefix("ack ")
                .unwrap_or_else(|| panic!("{}: bad line {line:?}", path.display()))
                .split(' ')
                .map(|x| x.parse().unwrap())
                .collect();
            let (term, first, last) = (f[0], f[1], f[2]);
            for index in first..=last {
                assert_eq!(
                    terms.get(&index),
                    Some(&term),
                    "member {i} acknowledged entry {index} in term {term}, but the ledger holds {:?} there",
                    terms.get(&index)
                );
            }
            *per_term.entry(term).or_insert(0) += (last - first + 1) as usize;
        }
    }
    per_term
}

/// The address of a master of `cluster` other than `not`, once the
/// NameServer knows one (waits up to `bound`).
pub async fn cluster_master(
    admin: &Admin,
    cluster: &str,
    not: Option<&str>,
    bound: Duration,
) -> String {
    let mut addr = String::new();
    eventually("a ledger master", bound, async || {
        match admin.cluster_masters(cluster).await {
            Ok(m) => match m.into_iter().find(|(_, a)| Some(a.as_str()) != not) {
                Some((_, a)) => {
                    addr = a;
                    true
                }
                None => false,
            },
            Err(_) => false,
        }
    })
    .await;
    addr
}

/// Whether the broker at `addr` has `topic` in its topic table
/// (GET_TOPIC_CONFIG answers SUCCESS). A follower's consume queues may
/// exist before its topic table has the topic: it copies the table from the
/// leader every `slaveSyncInterval`.
pub async fn has_topic_config(client: &RemotingClient, addr: &str, topic: &str) -> bool {
    let mut ext = ExtFields::new();
    ext.insert("topic", topic);
    let cmd = RemotingCommand::request(request::GET_TOPIC_CONFIG).with_ext(ext);
    client
        .invoke(addr, cmd, Duration::from_secs(3))
        .await
        .is_ok_and(|r| r.code == response::SUCCESS)
}
