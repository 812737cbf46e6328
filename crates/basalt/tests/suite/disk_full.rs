//! A full disk with real processes, on small ext4 file systems the tests make
//! themselves (a loop-mounted image, so they need root; as another user they
//! are skipped with a printed reason):
//!
//! * a broker produced into until its disk is full refuses sends with an error
//!   naming the disk; it never dies, every acknowledged message stays readable,
//!   it restarts on the completely full disk (after SIGKILL and after a clean
//!   stop) and takes sends again once space is freed;
//! * the same for a ledger-mode broker (a one-member group);
//! * a SYNC_MASTER whose slave's disk is full answers with the HA statuses,
//!   never hangs, and both go on once the slave has room again.
//!
//! Each test keeps its image's mount for its own life only: the guard unmounts
//! and removes it, also when the test fails.

use crate::procs;
use crate::standalone;

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use basalt_client::{
    Admin, ClientConfig, ClientError, Message, Producer, PullConsumer, PullStatus, SendStatus,
    TopicConfig, TopicQueue,
};
use basalt_remoting::code::response;
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use procs::{Proc, free_port, free_port_pair, write_conf};
use standalone::Standalone;

const MB: u64 = 1 << 20;
const TOPIC: &str = "DiskFull";
/// CommitLog (and ledger data) files of 8 MiB: a few fill the small disks.
const SEGMENT: &str = "mappedFileSizeCommitLog=8388608";
/// ConsumeQueue files of 20,000 units (400,000 bytes).
const CQ_FILE: &str = "mappedFileSizeConsumeQueue=400000";
/// RocketMQ's default, which the test helpers turn off for other tests.
const WARNING_AT_90: &str = "diskSpaceWarningLevelRatio=90";
/// Bounds every wait of these tests.
const BOUND: Duration = Duration::from_secs(30);

/// A loop-mounted ext4 image in a temporary directory; unmounted and removed
/// when dropped.
pub(crate) struct LoopFs {
    dir: tempfile::TempDir,
    img: PathBuf,
    mnt: PathBuf,
    mounted: bool,
}

impl LoopFs {
    /// Makes and mounts an image of `mb` MiB, or says why it cannot.
    pub(crate) fn create(mb: u64) -> Result<LoopFs, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not running as root: mounting a loop device needs root".into());
        }
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let img = dir.path().join("disk.img");
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).map_err(|e| e.to_string())?;
        File::create(&img)
            .and_then(|f| f.set_len(mb * MB))
            .map_err(|e| e.to_string())?;
        let mut fs = LoopFs {
            dir,
            img,
            mnt,
            mounted: false,
        };
        // No blocks reserved for root: the broker runs as root here, and the
        // usage it sees must be the usage that makes allocations fail.
        run("mkfs.ext4", &["-q", "-F", "-m", "0", "-b", "4096"], &fs.img)?;
        let mut mount = Command::new("mount");
        mount.args(["-o", "loop"]).arg(&fs.img).arg(&fs.mnt);
        let out = mount.output().map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -o loop failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        fs.mounted = true;
        Ok(fs)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.mnt.join(name)
    }

    /// A path outside the image that leads to `name` on it: a broker's log
    /// goes beside its data directory and must not need room on the full disk.
    pub(crate) fn link(&self, name: &str) -> PathBuf {
        let target = self.path(name);
        std::fs::create_dir_all(&target).unwrap();
        let link = self.dir.path().join(name);
        std::os::unix::fs::symlink(&target, &link).unwrap();
        link
    }

    pub(crate) fn statvfs(&self) -> libc::statvfs {
        let c = std::ffi::CString::new(self.mnt.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: statvfs writes into the zeroed struct; the path is a C string.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: `c` is a NUL-terminated path and `st` a struct we own.
        let rc = unsafe { libc::statvfs(c.as_ptr(), &mut st) };
        assert_eq!(rc, 0);
        st
    }

    /// Bytes an unprivileged writer could still allocate.
    pub(crate) fn avail(&self) -> u64 {
        let st = self.statvfs();
        st.f_bavail * st.f_frsize
    }

    pub(crate) fn used_percent(&self) -> u64 {
        let st = self.statvfs();
        let used = st.f_blocks - st.f_bfree;
        used * 100 / (used + st.f_bavail).max(1)
    }

    /// Writes a file of allocated blocks that leaves about `leave` bytes free
    /// (0: as close to nothing as allocation allows).
    pub(crate) fn fill(&self, name: &str, leave: u64) -> PathBuf {
        let p = self.path(name);
        let f = File::create(&p).unwrap();
        let mut len = 0u64;
        let mut step = u64::MAX;
        loop {
            let want = self.avail().saturating_sub(leave) / 4096 * 4096;
            step = step.min(want);
            if step < 4096 {
                break;
            }
            // SAFETY: plain syscall on a descriptor we own.
            let rc = unsafe {
                libc::fallocate(f.as_raw_fd(), 0, len as libc::off_t, step as libc::off_t)
            };
            if rc == 0 {
                len += step;
            } else {
                step /= 2;
            }
        }
        eprintln!(
            "{name}: {len} bytes, {} bytes left, {}% used",
            self.avail(),
            self.used_percent()
        );
        p
    }
}

impl Drop for LoopFs {
    fn drop(&mut self) {
        if self.mounted {
            let ok = Command::new("umount")
                .arg(&self.mnt)
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                // Something still holds it (a failing test's process is being
                // killed): detach it now, the kernel frees it when released.
                let _ = Command::new("umount").arg("-l").arg(&self.mnt).status();
            }
        }
        let _ = std::fs::remove_file(&self.img);
    }
}

fn run(cmd: &str, args: &[&str], path: &Path) -> Result<(), String> {
    let out = Command::new(cmd)
        .args(args)
        .arg(path)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// The test's file system, or `None` (after saying why) when it cannot be made.
pub(crate) fn loop_fs(mb: u64) -> Option<LoopFs> {
    match LoopFs::create(mb) {
        Ok(fs) => Some(fs),
        Err(why) => {
            eprintln!("SKIPPED: a disk-full test needs a loop-mounted ext4 image: {why}");
            None
        }
    }
}

pub(crate) fn client_config(ns: &str) -> ClientConfig {
    let mut c = ClientConfig::new(ns);
    c.poll_name_server_interval = Duration::from_millis(300);
    c.heartbeat_interval = Duration::from_millis(500);
    c.request_timeout = Duration::from_secs(5);
    c
}

fn body(id: u64) -> Vec<u8> {
    let mut b = format!("id-{id:08}-").into_bytes();
    b.resize(1024, b'x');
    b
}

/// What a run of sends got.
#[derive(Debug, Default)]
pub(crate) struct Produced {
    /// (message id, queue id, queue offset) of every SEND_OK.
    pub(crate) acked: Vec<(u64, i32, i64)>,
    /// Error answers: (code, remark).
    pub(crate) refused: Vec<(i32, String)>,
    /// Answers that stored the message but not as asked (HA statuses).
    pub(crate) not_ok: Vec<SendStatus>,
}

/// Sends 1 KiB messages (ids from `from`, up to 32 in flight) until `enough`
/// answers were refusals or non-OK statuses, or `max` were sent. A send that
/// gets no answer at all (time-out, lost connection) fails the test: the
/// broker must answer every send.
pub(crate) async fn produce(
    p: &Producer,
    queues: &[TopicQueue],
    from: u64,
    max: u64,
    enough: usize,
) -> Produced {
    let mut out = Produced::default();
    let mut inflight = FuturesUnordered::new();
    let mut next = from;
    loop {
        let done = out.refused.len() + out.not_ok.len() >= enough || next >= from + max;
        while !done && inflight.len() < 32 {
            let id = next;
            next += 1;
            let mq = queues[id as usize % queues.len()].clone();
            let p = p.clone();
            inflight.push(async move {
                let m = Message::new(TOPIC, body(id));
                (id, p.send_to(&m, &mq).await)
            });
        }
        let Some((id, r)) = inflight.next().await else {
            return out;
        };
        match r {
            Ok(r) if r.status == SendStatus::SendOk => {
                out.acked.push((id, r.queue.queue_id, r.queue_offset))
            }
            Ok(r) => out.not_ok.push(r.status),
            Err(ClientError::Broker { code, remark, .. }) => out.refused.push((code, remark)),
            Err(e) => panic!("send {id} got no answer: {e}"),
        }
    }
}

/// Prints what a run of sends got (shown with --nocapture).
fn report(what: &str, r: &Produced, fs: &LoopFs) {
    let mut kinds: Vec<String> = r
        .refused
        .iter()
        .map(|(c, m)| format!("{c} {}", m.chars().take(60).collect::<String>()))
        .collect();
    kinds.sort();
    kinds.dedup();
    eprintln!(
        "{what}: {} acknowledged, {} refused {kinds:?}, {} stored but not SEND_OK, disk {}% used",
        r.acked.len(),
        r.refused.len(),
        r.not_ok.len(),
        fs.used_percent()
    );
}

/// Sends until one is SEND_OK (the broker takes writes again), bounded.
async fn until_accepted(p: &Producer, queues: &[TopicQueue], from: u64) -> Produced {
    let deadline = Instant::now() + BOUND;
    let mut all = Produced::default();
    let mut id = from;
    loop {
        let r = produce(p, queues, id, 1, 1).await;
        id += 1;
        let ok = !r.acked.is_empty();
        all.acked.extend(r.acked);
        if ok {
            return all;
        }
        assert!(
            Instant::now() < deadline,
            "sends not accepted again: {:?} {:?}",
            r.refused,
            r.not_ok
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Every message of every queue of the topic, by (queue id, queue offset).
async fn read_all(ns: &str) -> HashMap<(i32, i64), Vec<u8>> {
    let c = PullConsumer::new("disk-full-reader", client_config(ns));
    c.start().await.unwrap();
    let mut out = HashMap::new();
    for mq in c.fetch_queues(TOPIC).await.unwrap() {
        let mut offset = 0;
        loop {
            let r = c
                .pull(&mq, "*", offset, 32, Duration::from_secs(5))
                .await
                .unwrap_or_else(|e| panic!("pull {mq:?} at {offset}: {e}"));
            match r.status {
                PullStatus::Found => {
                    for m in r.msgs {
                        out.insert((m.queue_id, m.queue_offset), m.body.to_vec());
                    }
                    offset = r.next_begin_offset;
                }
                PullStatus::NoNewMsg => break,
                other => panic!("pull {mq:?} at {offset}: {other:?}"),
            }
        }
    }
    c.shutdown().await;
    out
}

/// Every acknowledged message reads back as sent. Dispatch into the queues
/// trails acknowledgement a little, so a missing one is looked for again
/// (bounded) before the test fails.
async fn assert_readable(ns: &str, acked: &[(u64, i32, i64)]) {
    let deadline = Instant::now() + BOUND;
    loop {
        let got = read_all(ns).await;
        let missing = acked
            .iter()
            .find(|(_, q, off)| !got.contains_key(&(*q, *off)));
        if let Some((id, q, off)) = missing {
            assert!(
                Instant::now() < deadline,
                "acknowledged message {id} (queue {q}, offset {off}) is gone"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        }
        for (id, q, off) in acked {
            assert_eq!(
                got[&(*q, *off)],
                body(*id),
                "message {id} at queue {q} offset {off}"
            );
        }
        return;
    }
}

pub(crate) async fn producer(ns: &str) -> (Producer, Vec<TopicQueue>) {
    let p = Producer::new("disk-full-producer", client_config(ns));
    p.start().await.unwrap();
    let deadline = Instant::now() + BOUND;
    let queues = loop {
        match p.fetch_publish_queues(TOPIC).await {
            Ok(q) if !q.is_empty() => break q,
            r => assert!(Instant::now() < deadline, "no route for {TOPIC}: {r:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    (p, queues)
}

pub(crate) async fn create_topic(ns: &str, broker: &str) {
    let admin = Admin::new(client_config(ns));
    admin
        .create_topic(broker, &TopicConfig::new(TOPIC, 4))
        .await
        .unwrap();
    admin.shutdown();
}

/// The broker still answers a request that needs no disk.
async fn assert_answers(ns: &str, broker: &str) {
    let admin = Admin::new(client_config(ns));
    let info = admin.broker_runtime_info(broker).await.unwrap();
    assert!(!info.is_empty());
    admin.shutdown();
}

fn assert_disk_full_refusals(r: &Produced, disk: &Path) {
    assert!(!r.refused.is_empty(), "nothing was refused: {r:?}");
    for (code, remark) in &r.refused {
        assert_eq!(
            *code,
            response::SERVICE_NOT_AVAILABLE,
            "refused with {code}: {remark}"
        );
    }
    // The answer says which disk and how full it is.
    let named = r.refused.iter().any(|(_, m)| {
        m.contains("disk full") && m.contains(&disk.display().to_string()) && m.contains('%')
    });
    assert!(named, "no refusal names the disk: {:?}", r.refused);
}

/// A start on a full disk rewrote no metadata file (it would have failed).
fn assert_started_without_writes(broker: &Standalone) {
    let log = broker.log_text();
    assert!(!log.contains("cannot persist"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_on_a_full_disk_refuses_cleanly_restarts_and_recovers() {
    let Some(fs) = loop_fs(128) else { return };
    let data = fs.link("store");
    // Leave the broker about 40 MiB: a few CommitLog files.
    let filler = fs.fill("filler-a", 40 * MB);
    let mut broker = Standalone::start(
        &data,
        &[
            SEGMENT,
            CQ_FILE,
            WARNING_AT_90,
            "cleanFileForciblyEnable=false",
        ],
    );
    let ns = broker.namesrv_addr();
    create_topic(&ns, &broker.broker_addr()).await;
    let (p, queues) = producer(&ns).await;

    let first = produce(&p, &queues, 0, 1_000_000, 50).await;
    report("CommitLog broker until refused", &first, &fs);
    assert!(
        first.acked.len() > 1000,
        "{} acknowledged",
        first.acked.len()
    );
    assert_disk_full_refusals(&first, &data);
    assert!(
        fs.used_percent() > 90,
        "refused at {}% used",
        fs.used_percent()
    );
    assert!(broker.is_running());
    assert_answers(&ns, &broker.broker_addr()).await;
    let mut acked = first.acked;
    assert_readable(&ns, &acked).await;
    p.shutdown().await;

    // Now nothing at all is left; the broker restarts anyway, after a crash
    // and after a clean stop, and serves what it has.
    let filler_b = fs.fill("filler-b", 0);
    assert!(fs.avail() < MB, "{} bytes left", fs.avail());
    broker.kill();
    broker.restart();
    assert_readable(&ns, &acked).await;
    assert_started_without_writes(&broker);
    let (p, queues) = producer(&ns).await;
    let refused = produce(&p, &queues, 2_000_000, 100, 5).await;
    assert!(refused.acked.is_empty());
    assert_disk_full_refusals(&refused, &data);
    p.shutdown().await;
    broker.stop();
    broker.restart();
    assert_readable(&ns, &acked).await;
    assert_started_without_writes(&broker);

    // Space comes back: sends are taken again, without a restart.
    std::fs::remove_file(filler_b).unwrap();
    std::fs::remove_file(filler).unwrap();
    let (p, queues) = producer(&ns).await;
    acked.extend(until_accepted(&p, &queues, 3_000_000).await.acked);
    let more = produce(&p, &queues, 3_100_000, 2000, 1).await;
    assert!(more.refused.is_empty(), "{:?}", more.refused);
    acked.extend(more.acked);
    assert_readable(&ns, &acked).await;
    p.shutdown().await;
    assert!(broker.is_running());
    broker.stop();
}

/// The reported failure: with nothing refused early (the warning ratio at
/// 100), producing until the file system itself is full used to end in
/// SIGBUS. Now the CommitLog file that cannot get its blocks is a clean
/// CREATE_MAPPED_FILE_FAILED, and the broker lives on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_writing_until_the_file_system_is_full_gets_a_clean_error() {
    let Some(fs) = loop_fs(64) else { return };
    let data = fs.link("store");
    let filler = fs.fill("filler", 28 * MB);
    let mut broker = Standalone::start(
        &data,
        &[
            SEGMENT,
            CQ_FILE,
            "cleanFileForciblyEnable=false",
            "diskSpaceWarningLevelRatio=100",
        ],
    );
    let ns = broker.namesrv_addr();
    create_topic(&ns, &broker.broker_addr()).await;
    let (p, queues) = producer(&ns).await;
    let r = produce(&p, &queues, 0, 1_000_000, 50).await;
    report("CommitLog broker until ENOSPC", &r, &fs);
    assert!(r.acked.len() > 1000, "{} acknowledged", r.acked.len());
    for (code, remark) in &r.refused {
        assert_eq!(*code, response::SYSTEM_ERROR, "{remark}");
        assert!(remark.contains("CREATE_MAPPED_FILE_FAILED"), "{remark}");
        assert!(remark.contains("No space left on device"), "{remark}");
    }
    assert!(broker.is_running(), "the broker died when the disk filled");
    let mut acked = r.acked;
    assert_readable(&ns, &acked).await;
    p.shutdown().await;
    // It comes back after a crash on this disk, too.
    broker.kill();
    broker.restart();
    assert_readable(&ns, &acked).await;
    std::fs::remove_file(filler).unwrap();
    let (p, queues) = producer(&ns).await;
    acked.extend(until_accepted(&p, &queues, 2_000_000).await.acked);
    let more = produce(&p, &queues, 2_100_000, 1000, 1).await;
    assert!(more.refused.is_empty(), "{:?}", more.refused);
    acked.extend(more.acked);
    assert_readable(&ns, &acked).await;
    p.shutdown().await;
    broker.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ledger_broker_on_a_full_disk_refuses_cleanly_and_recovers() {
    let Some(fs) = loop_fs(96) else { return };
    let data = fs.link("ledger");
    let filler = fs.fill("filler", 36 * MB);
    let peers = format!("dLegerPeers=n0-127.0.0.1:{}", free_port());
    let mut broker = Standalone::start(
        &data,
        &[
            SEGMENT,
            CQ_FILE,
            WARNING_AT_90,
            "cleanFileForciblyEnable=false",
            "enableDLegerCommitLog=true",
            "dLegerGroup=broker-a",
            "dLegerSelfId=n0",
            &peers,
        ],
    );
    let ns = broker.namesrv_addr();
    // The one member elects itself; then the topic can be made on the master.
    let deadline = Instant::now() + BOUND;
    let admin = Admin::new(client_config(&ns));
    while admin
        .create_topic(&broker.broker_addr(), &TopicConfig::new(TOPIC, 4))
        .await
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "the ledger broker never took the topic"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    admin.shutdown();
    let (p, queues) = producer(&ns).await;
    let mut acked = until_accepted(&p, &queues, 0).await.acked;

    let r = produce(&p, &queues, 10, 1_000_000, 50).await;
    report("ledger broker until refused", &r, &fs);
    assert!(r.acked.len() > 1000, "{} acknowledged", r.acked.len());
    assert!(!r.refused.is_empty());
    for (code, remark) in &r.refused {
        assert_eq!(*code, response::SERVICE_NOT_AVAILABLE, "{remark}");
        assert!(
            remark.contains("disk full") || remark.contains("no room on the disk"),
            "{remark}"
        );
    }
    acked.extend(r.acked);
    assert!(broker.is_running());
    assert_answers(&ns, &broker.broker_addr()).await;
    assert_readable(&ns, &acked).await;

    std::fs::remove_file(filler).unwrap();
    acked.extend(until_accepted(&p, &queues, 2_000_000).await.acked);
    let more = produce(&p, &queues, 2_100_000, 2000, 1).await;
    assert!(more.refused.is_empty(), "{:?}", more.refused);
    acked.extend(more.acked);
    assert_readable(&ns, &acked).await;
    p.shutdown().await;
    assert!(broker.is_running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_master_answers_ha_statuses_while_its_slave_disk_is_full() {
    let Some(fs) = loop_fs(64) else { return };
    let work = tempfile::tempdir().unwrap();
    let mut master = Standalone::start(
        &work.path().join("master"),
        &[
            SEGMENT,
            CQ_FILE,
            "brokerRole=SYNC_MASTER",
            "syncFlushTimeout=1000",
            "registerNameServerPeriod=500",
        ],
    );
    let ns = master.namesrv_addr();
    create_topic(&ns, &master.broker_addr()).await;
    // The slave's disk holds about two CommitLog files.
    let filler = fs.fill("filler", 20 * MB);
    let slave_conf = write_conf(
        work.path(),
        "slave",
        &[
            ("brokerClusterName", "DefaultCluster".into()),
            ("brokerName", "broker-a".into()),
            ("brokerId", "1".into()),
            ("brokerRole", "SLAVE".into()),
            ("listenAddr", "127.0.0.1".into()),
            ("brokerIP1", "127.0.0.1".into()),
            ("brokerIP2", "127.0.0.1".into()),
            ("listenPort", free_port_pair().to_string()),
            ("namesrvAddr", ns.clone()),
            ("storePathRootDir", fs.path("slave").display().to_string()),
            ("mappedFileSizeCommitLog", (8 * MB).to_string()),
            ("mappedFileSizeConsumeQueue", "400000".into()),
            ("registerNameServerPeriod", "500".into()),
            ("slaveSyncInterval", "500".into()),
            // Otherwise it would make room by deleting its oldest files.
            ("cleanFileForciblyEnable", "false".into()),
        ],
    );
    let mut slave = Proc::spawn(
        "slave",
        &["broker", "-c", slave_conf.to_str().unwrap()],
        "basalt broker",
        work.path(),
    );
    let (p, queues) = producer(&ns).await;
    // SYNC_MASTER answers SLAVE_NOT_AVAILABLE until the slave is in sync.
    let deadline = Instant::now() + BOUND;
    let mut id = 0;
    loop {
        let r = produce(&p, &queues, id, 1, 1).await;
        id += 1;
        if !r.acked.is_empty() {
            break;
        }
        assert!(r.refused.is_empty(), "{:?}", r.refused);
        assert!(Instant::now() < deadline, "the slave never got in sync");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The slave's disk fills: the master keeps answering, with HA statuses.
    let r = produce(&p, &queues, 1000, 1_000_000, 40).await;
    report("SYNC_MASTER until its slave's disk is full", &r, &fs);
    assert!(r.acked.len() > 1000, "{} acknowledged", r.acked.len());
    assert!(r.refused.is_empty(), "the master refused: {:?}", r.refused);
    for s in &r.not_ok {
        assert!(
            matches!(
                s,
                SendStatus::FlushSlaveTimeout | SendStatus::SlaveNotAvailable
            ),
            "{s:?}"
        );
    }
    assert!(slave.is_running(), "the slave with a full disk died");
    assert!(master.is_running());
    assert_answers(&ns, &master.broker_addr()).await;

    // Room again: the slave catches up and the master answers SEND_OK.
    std::fs::remove_file(filler).unwrap();
    until_accepted(&p, &queues, 2_000_000).await;
    let more = produce(&p, &queues, 2_100_000, 500, 1).await;
    assert!(
        more.not_ok.is_empty() && more.refused.is_empty(),
        "{more:?}"
    );
    p.shutdown().await;
    assert!(slave.is_running());
    slave.stop();
}
