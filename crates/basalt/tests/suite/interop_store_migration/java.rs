//! The Java side of the migration tests: Apache RocketMQ 5.5.0's NameServer
//! and broker started through `scripts/java-broker.sh` (killed -9 when
//! dropped), and the loader (`interop/java-broker`, `basalt.interop.Loader`)
//! that writes and reads a store's content through the Java client.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use crate::interop::{java_command, run_bounded, workspace_root};

/// How long a Java NameServer or broker may take to say it booted (two
/// busy cores, C1 only).
const BOOT_DEADLINE: Duration = Duration::from_secs(90);

/// One Java process started by scripts/java-broker.sh (which execs the
/// JVM), its output in a log file. Killed with SIGKILL when dropped.
pub struct JavaProc {
    pub name: String,
    child: Option<Child>,
    pub log: PathBuf,
}

impl JavaProc {
    /// Runs `scripts/java-broker.sh ARGS` until a line contains `ready`.
    fn spawn(name: &str, classpath: &Path, args: &[String], ready: &str, log: PathBuf) -> JavaProc {
        let mut child = Command::new("bash")
            .arg(workspace_root().join("scripts").join("java-broker.sh"))
            .args(args)
            .env("JAVA_BROKER_CLASSPATH", classpath)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        let file = std::fs::File::create(&log).expect("java log");
        let file2 = file.try_clone().expect("java log");
        let (tx, rx) = mpsc::channel::<()>();
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let ready = ready.to_string();
        std::thread::spawn(move || {
            let mut f = file;
            let mut tx = Some(tx);
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = writeln!(f, "{line}");
                if line.contains(&ready)
                    && let Some(t) = tx.take()
                {
                    let _ = t.send(());
                }
            }
        });
        std::thread::spawn(move || {
            let mut f = file2;
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = writeln!(f, "{line}");
            }
        });
        let mut p = JavaProc {
            name: name.to_string(),
            child: Some(child),
            log,
        };
        if rx.recv_timeout(BOOT_DEADLINE).is_err() {
            p.kill9();
            panic!("{name} did not boot; its output:\n{}", p.log_tail(60));
        }
        p
    }

    /// SIGKILL and reap.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The last `n` lines of the process's output.
    pub fn log_tail(&self, n: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }
}

impl Drop for JavaProc {
    fn drop(&mut self) {
        let running = self.child.is_some();
        self.kill9();
        if running && std::thread::panicking() {
            eprintln!(
                "---- {} output, last lines ----\n{}",
                self.name,
                self.log_tail(40)
            );
        }
    }
}

/// A port `p` with `p − 2` and `p + 1` free too (the Java broker listens on
/// listenPort, listenPort − 2 and haListenPort = listenPort + 1).
fn free_broker_port() -> u16 {
    for _ in 0..200 {
        let p = crate::procs::free_port();
        if !(1100..=64000).contains(&p) {
            continue;
        }
        let free = |q: u16| std::net::TcpListener::bind(("0.0.0.0", q)).is_ok();
        if free(p - 2) && free(p + 1) && free(p) {
            return p;
        }
    }
    panic!("no free port triple for the Java broker");
}

/// A Java NameServer and broker over one store directory.
pub struct JavaBroker {
    pub namesrv: JavaProc,
    pub broker: JavaProc,
    pub namesrv_addr: String,
    pub broker_addr: String,
}

impl JavaBroker {
    /// Starts both on free ports with `store` as storePathRootDir.
    pub fn start(family: &Path, work: &Path, store: &Path, flush: &str) -> JavaBroker {
        let cp = family.join("broker.classpath");
        let ns_port = crate::procs::free_port();
        let ns_log = work.join(format!("java-namesrv-{ns_port}.log"));
        let namesrv = JavaProc::spawn(
            "java-namesrv",
            &cp,
            &["namesrv".into(), "--port".into(), ns_port.to_string()],
            "boot success",
            ns_log,
        );
        let namesrv_addr = format!("127.0.0.1:{ns_port}");
        let port = free_broker_port();
        let args: Vec<String> = [
            "broker",
            "--namesrv",
            &namesrv_addr,
            "--port",
            &port.to_string(),
            "--store",
            &store.to_string_lossy(),
            "--flush",
            flush,
            "--heap",
            "384m",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let broker = JavaProc::spawn(
            "java-broker",
            &cp,
            &args,
            "boot success",
            work.join(format!("java-broker-{port}.log")),
        );
        JavaBroker {
            namesrv,
            broker,
            namesrv_addr,
            broker_addr: format!("127.0.0.1:{port}"),
        }
    }

    /// kill -9 of the broker, then of the NameServer.
    pub fn kill9(&mut self) {
        self.broker.kill9();
        self.namesrv.kill9();
    }
}

/// Runs the loader (`basalt.interop.Loader ARGS`), bounded, and returns the
/// lines it printed that start with one of its record kinds.
pub fn loader(family: &Path, home: &Path, args: &[&str], secs: u64) -> Vec<Vec<String>> {
    let mut cmd = java_command(family, "broker", "basalt.interop.Loader");
    cmd.args(args)
        // The client logs under ~/logs; keep that in the test's directory.
        .env(
            "JAVA_TOOL_OPTIONS",
            format!("-Duser.home={}", home.display()),
        );
    let what = format!("loader {}", args.join(" "));
    let done = run_bounded(&mut cmd, Duration::from_secs(secs));
    if !done.success() {
        panic!("{}", done.report(&what));
    }
    let kinds = [
        "SETUP", "SENT", "DELAYED", "LOCKED", "COMMIT", "QUEUE", "MSG", "OFFSET", "GOT", "TOPIC",
        "GROUP", "WAITED", "TIMER",
    ];
    let lines: Vec<Vec<String>> = done
        .stdout
        .lines()
        .filter(|l| kinds.iter().any(|k| l.starts_with(&format!("{k}\t"))))
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect();
    println!("{what}: {} lines", lines.len());
    lines
}

/// The rows of one kind.
pub fn rows<'a>(lines: &'a [Vec<String>], kind: &str) -> Vec<&'a Vec<String>> {
    lines.iter().filter(|l| l[0] == kind).collect()
}

/// One message as the loader printed it (a MSG or GOT line), by field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Msg {
    pub topic: String,
    pub queue: i32,
    pub offset: i64,
    pub msg_id: String,
    pub uniq_key: String,
    pub tags: String,
    pub keys: String,
    pub born_ts: i64,
    pub store_ts: i64,
    pub born_host: String,
    pub sys_flag: i32,
    pub reconsume: i32,
    pub flag: i32,
    pub props: BTreeMap<String, String>,
    pub body: String,
}

/// Parses `k=v;k=v`.
pub fn parse_props(s: &str) -> BTreeMap<String, String> {
    s.split(';')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (k.to_string(), v.to_string())
        })
        .collect()
}

impl Msg {
    pub fn parse(l: &[String]) -> Msg {
        assert!(l.len() >= 16, "message line {l:?}");
        let num = |i: usize| -> i64 {
            l[i].parse()
                .unwrap_or_else(|_| panic!("field {i} of {l:?}"))
        };
        Msg {
            topic: l[1].clone(),
            queue: num(2) as i32,
            offset: num(3),
            msg_id: l[4].clone(),
            uniq_key: l[5].clone(),
            tags: l[6].clone(),
            keys: l[7].clone(),
            born_ts: num(8),
            store_ts: num(9),
            born_host: l[10].clone(),
            sys_flag: num(11) as i32,
            reconsume: num(12) as i32,
            flag: num(13) as i32,
            props: parse_props(&l[14]),
            body: l[15..].join("\t"),
        }
    }

    /// (topic, queue, queue offset).
    pub fn at(&self) -> (String, i32, i64) {
        (self.topic.clone(), self.queue, self.offset)
    }
}

/// Every MSG line, keyed by where it is served.
pub fn messages(lines: &[Vec<String>]) -> BTreeMap<(String, i32, i64), Msg> {
    let mut out = BTreeMap::new();
    for l in rows(lines, "MSG") {
        let m = Msg::parse(l);
        assert!(
            out.insert(m.at(), m.clone()).is_none(),
            "served twice: {m:?}"
        );
    }
    out
}
