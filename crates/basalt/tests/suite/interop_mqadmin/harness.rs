//! Runs Apache RocketMQ's `mqadmin` (rocketmq-tools 5.5.0, built by
//! `interop/mqadmin/prepare.sh`) against one `basalt standalone`, and parses
//! what it prints.
//!
//! mqadmin catches a failing command's exception, prints its stack trace and
//! still exits 0, so [`Mq::ok`] fails on any exception text as well as on a
//! non-zero exit. Each run is its own JVM; the Java client's shutdown waits
//! up to 3 s for its event thread, so a run takes 4–7 s and independent
//! verbs run side by side ([`Mq::ok_all`]).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::interop::{Finished, java_command, run_bounded};

/// mqadmin's entry point.
const MAIN: &str = "org.apache.rocketmq.tools.command.MQAdminStartup";
/// Bound on one verb (JVM start, the request, the client's shutdown).
const VERB_DEADLINE: Duration = Duration::from_secs(90);
/// JVMs one test runs at once: each takes about a core for its first
/// second, and the machine has two.
const PARALLEL: usize = 3;

/// mqadmin pointed at one NameServer.
pub struct Mq {
    dir: PathBuf,
    home: PathBuf,
    pub namesrv: String,
    /// `ROCKETMQ_HOME` for the JVM: mqadmin signs its requests with the
    /// `accessKey`/`secretKey` of `$ROCKETMQ_HOME/conf/tools.yml`. Unset
    /// (and removed from the environment) when `None`.
    rocketmq_home: Option<PathBuf>,
}

impl Mq {
    /// `dir` is the family's READY directory; `home` takes mqadmin's log
    /// files (`~/logs/rocketmqlogs`), so runs do not write to the real home.
    pub fn new(dir: PathBuf, home: &Path, namesrv: String) -> Mq {
        Mq {
            dir,
            home: home.to_path_buf(),
            namesrv,
            rocketmq_home: None,
        }
    }

    /// The same mqadmin run with `ROCKETMQ_HOME` set to `dir` (credentials
    /// in `dir/conf/tools.yml`, if there is one).
    pub fn with_rocketmq_home(mut self, dir: &Path) -> Mq {
        self.rocketmq_home = Some(dir.to_path_buf());
        self
    }

    fn command(&self, args: &[&str]) -> Command {
        // `java_command` appends its last argument after the JVM options, so
        // a JVM option goes there and the main class after it.
        let mut cmd = java_command(
            &self.dir,
            "mqadmin",
            &format!("-Duser.home={}", self.home.display()),
        );
        cmd.arg(MAIN).args(args).args(["-n", &self.namesrv]);
        match &self.rocketmq_home {
            Some(h) => cmd.env("ROCKETMQ_HOME", h),
            None => cmd.env_remove("ROCKETMQ_HOME"),
        };
        cmd
    }

    /// Runs one verb to its end, whatever it prints.
    pub fn run(&self, args: &[&str]) -> Finished {
        println!(">>> mqadmin {}", args.join(" "));
        run_bounded(&mut self.command(args), VERB_DEADLINE)
    }

    /// Runs one verb; panics unless it exits 0 without an exception. Returns
    /// its stdout (the whole run is printed).
    ///
    /// A run whose Java client timed out waiting for an answer is run once
    /// more (printing why): on two busy cores a starting JVM can miss the
    /// client's 3 s request timeout by itself. A second timeout fails.
    pub fn ok(&self, args: &[&str]) -> String {
        let what = format!("mqadmin {}", args.join(" "));
        let mut f = self.run(args);
        if f.stdout.contains("RemotingTimeoutException")
            || f.stderr.contains("RemotingTimeoutException")
        {
            println!(
                "{}\n(the Java client timed out; running it once more)",
                f.report(&what)
            );
            f = self.run(args);
        }
        check_clean(f, &what)
    }

    /// [`Self::ok`] for independent verbs, [`PARALLEL`] at a time; outputs
    /// in the order given.
    pub fn ok_all(&self, verbs: &[&[&str]]) -> Vec<String> {
        let mut out = Vec::with_capacity(verbs.len());
        for chunk in verbs.chunks(PARALLEL) {
            std::thread::scope(|s| {
                let handles: Vec<_> = chunk
                    .iter()
                    .map(|args| s.spawn(move || self.ok(args)))
                    .collect();
                for h in handles {
                    out.push(h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)));
                }
            });
        }
        out
    }

    /// Runs a verb that never ends by itself (clusterRT loops), killing it
    /// after `run_for`; returns what it printed by then.
    pub fn run_for(&self, args: &[&str], run_for: Duration) -> Finished {
        println!(">>> mqadmin {} (for {run_for:?})", args.join(" "));
        run_bounded(&mut self.command(args), run_for)
    }
}

/// Panics unless `f` exited 0 and printed no exception; returns its stdout.
pub fn check_clean(f: Finished, what: &str) -> String {
    let both = format!("{}\n{}", f.stdout, f.stderr);
    if !f.success() || both.contains("Exception") || both.contains("command failed") {
        panic!("{}", f.report(what));
    }
    println!("{}", f.report(what));
    f.stdout
}

/// Rows of a table: the whitespace-split lines after the header line that
/// starts with `header` (mqadmin's headers start with `#`), up to the first
/// empty line.
pub fn rows(out: &str, header: &str) -> Vec<Vec<String>> {
    let mut lines = out.lines().skip_while(|l| !l.starts_with(header));
    assert!(
        lines.next().is_some(),
        "no header {header:?} in the output:\n{out}"
    );
    lines
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .collect()
}

/// The value after `key` + separator on its own line (`Topic:   Orders`,
/// `brokerRole : ASYNC_MASTER`, `maxMessageSize  =  1048576`).
pub fn field(out: &str, key: &str, sep: char) -> Option<String> {
    out.lines().find_map(|l| {
        let (k, v) = l.split_once(sep)?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

/// A column of a row parsed as an integer.
pub fn num(row: &[String], col: usize) -> i64 {
    row.get(col)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("column {col} of {row:?} is not a number"))
}

/// Runs `basalt ARGS...` to its end; panics unless it succeeds.
pub fn basalt(args: &[&str]) -> String {
    println!(">>> basalt {}", args.join(" "));
    let out = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run basalt");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "basalt {args:?} failed: {text}{err}");
    println!("{text}");
    text
}

/// A live producer of a group (basalt-client, in this process) that has
/// sent one message and told the brokers of its group, until dropped.
pub struct LiveProducer {
    runtime: tokio::runtime::Runtime,
    producer: basalt_client::Producer,
}

impl LiveProducer {
    pub fn start(namesrv: &str, topic: &str, group: &str, body: &str) -> LiveProducer {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let producer =
            basalt_client::Producer::new(group, basalt_client::ClientConfig::new(namesrv));
        runtime.block_on(async {
            producer.start().await.expect("start the producer");
            let msg = basalt_client::Message::new(topic, body.as_bytes().to_vec());
            producer
                .send(&msg)
                .await
                .expect("the producer's first send");
            // The start's heartbeat knew no broker yet (no route); the next
            // would come 30 s later, as in the Java client.
            let acked = producer.instance().send_heartbeat_to_all_brokers().await;
            assert_eq!(acked, 1, "the broker took the producer's heartbeat");
        });
        LiveProducer { runtime, producer }
    }
}

impl Drop for LiveProducer {
    fn drop(&mut self) {
        self.runtime.block_on(self.producer.shutdown());
    }
}

/// A `basalt consume` push consumer of a group, killed when dropped.
pub struct LiveConsumer {
    child: Child,
}

impl LiveConsumer {
    pub fn start(namesrv: &str, topic: &str, group: &str) -> LiveConsumer {
        let child = Command::new(env!("CARGO_BIN_EXE_basalt"))
            .args(["consume", "--namesrv", namesrv, "-t", topic, "-g", group])
            .args(["--timeout", "200", "-q"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn basalt consume");
        LiveConsumer { child }
    }
}

impl Drop for LiveConsumer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
