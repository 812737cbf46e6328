//! Harness for the C++ client suite (compat_cpp_client.rs): finds or makes
//! the Python virtual environment that holds the client, and runs the
//! driver scripts of this directory as child processes that print JSON lines.
//!
//! The client is the PyPI package `rocketmq` 0.4.4, a Python binding whose
//! manylinux wheel bundles `librocketmq.so` (the Apache RocketMQ C++ client
//! 2.x). Every child is bounded in time and killed when its handle drops.
//! Children run with HOME set to the test's temporary directory, where the
//! C++ client keeps its logs (`logs/rocketmq-cpp/`) and the broadcasting
//! consumers' offsets (`.rocketmq_offsets/`).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The client package the suite runs.
pub const CLIENT_PACKAGE: &str = "rocketmq==0.4.4";
/// How long making the virtual environment may take.
const VENV_DEADLINE: Duration = Duration::from_secs(300);

/// The virtual environment's interpreter, made if needed; `None` (after
/// printing why) when it cannot be made here, e.g. PyPI is out of reach.
/// `BASALT_CPP_CLIENT_VENV` names a prepared one (CI makes it in `.ci/run`);
/// it must then work.
pub fn client_python() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("BASALT_CPP_CLIENT_VENV") {
        let python = Path::new(&dir).join("bin").join("python");
        if let Err(e) = importable(&python) {
            panic!(
                "BASALT_CPP_CLIENT_VENV={} has no usable C++ client: {e}",
                Path::new(&dir).display()
            );
        }
        return Some(python);
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cpp-client-venv");
    let python = dir.join("bin").join("python");
    if importable(&python).is_ok() {
        return Some(python);
    }
    let made = run_bounded(
        Command::new("python3")
            .args(["-m", "venv", "--clear"])
            .arg(&dir),
        VENV_DEADLINE,
    )
    .and_then(|_| {
        run_bounded(
            Command::new(&python).args([
                "-m",
                "pip",
                "install",
                "--disable-pip-version-check",
                "--quiet",
                CLIENT_PACKAGE,
            ]),
            VENV_DEADLINE,
        )
    })
    .and_then(|_| importable(&python));
    match made {
        Ok(()) => Some(python),
        Err(e) => {
            eprintln!(
                "SKIPPED: the C++ client suite needs {CLIENT_PACKAGE} from PyPI in a virtual \
                 environment at {} (or one named by BASALT_CPP_CLIENT_VENV), and it could not \
                 be made: {e}",
                dir.display()
            );
            None
        }
    }
}

/// Whether `python` can load the client library.
fn importable(python: &Path) -> Result<(), String> {
    if !python.exists() {
        return Err(format!("{} does not exist", python.display()));
    }
    run_bounded(
        Command::new(python).args(["-c", "import rocketmq.client"]),
        Duration::from_secs(60),
    )
}

/// Runs a command to completion within `limit`; its output is the error
/// when it fails or overruns (then it is killed).
fn run_bounded(cmd: &mut Command, limit: Duration) -> Result<(), String> {
    let what = format!("{cmd:?}");
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{what}: {e}"))?;
    let pid = child.id() as libc::pid_t;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(Ok(out)) if out.status.success() => Ok(()),
        Ok(Ok(out)) => Err(format!(
            "{what} exited with {}: {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )),
        Ok(Err(e)) => Err(format!("{what}: {e}")),
        Err(_) => {
            // SAFETY: the helper thread has not reaped the child yet (it is
            // still waiting for it).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            Err(format!("{what} did not finish within {limit:?}"))
        }
    }
}

/// What every driver needs: the interpreter, the scripts, HOME and the
/// NameServer.
#[derive(Clone)]
pub struct ClientEnv {
    pub python: PathBuf,
    pub home: PathBuf,
    pub namesrv: String,
}

impl ClientEnv {
    fn script(&self, name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests")
            .join("suite")
            .join("cpp_client")
            .join(name)
    }
}

/// One driver process: its JSON lines arrive on a channel; it is killed
/// when dropped.
pub struct Driver {
    pub name: String,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    stderr: PathBuf,
}

impl Driver {
    /// Starts `script` with `--namesrv` and `args`.
    pub fn spawn(env: &ClientEnv, name: &str, script: &str, args: &[&str]) -> Driver {
        let stderr = env.home.join(format!("{name}.stderr"));
        let err_file = std::fs::File::create(&stderr).expect("driver stderr file");
        let mut child = Command::new(&env.python)
            .arg(env.script(script))
            .args(["--namesrv", &env.namesrv])
            .args(args)
            .env("HOME", &env.home)
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(err_file))
            .spawn()
            .unwrap_or_else(|e| panic!("start {script}: {e}"));
        let stdout = child.stdout.take().expect("driver stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v = serde_json::from_str(&line).unwrap_or(Value::String(line));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        Driver {
            name: name.to_string(),
            stdin: child.stdin.take(),
            child: Some(child),
            lines: rx,
            stderr,
        }
    }

    /// The next line, if one arrives before `deadline`.
    pub fn next(&self, deadline: Instant) -> Option<Value> {
        self.lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .ok()
    }

    /// Reads lines until one has `"event": event`; panics past `deadline`.
    pub fn wait_event(&self, event: &str, deadline: Instant) -> Value {
        while let Some(v) = self.next(deadline) {
            if v["event"] == event {
                return v;
            }
        }
        panic!(
            "{}: no {event:?} line in time; {}",
            self.name,
            self.stderr_tail()
        );
    }

    /// Closes stdin (a push consumer then shuts down), reads every remaining
    /// line and waits for the exit.
    pub fn finish(mut self, deadline: Instant) -> (ExitStatus, Vec<Value>) {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok(v) => rest.push(v),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!(
                        "{}: did not exit in time; {}",
                        self.name,
                        self.stderr_tail()
                    )
                }
            }
        }
        let status = self
            .child
            .take()
            .expect("child")
            .wait()
            .expect("wait for driver");
        (status, rest)
    }

    /// The end of the driver's stderr, for failure messages.
    pub fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(20).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!("stderr of {}:\n{}", self.name, tail.join("\n"))
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A running push consumer and the messages it has printed so far.
pub struct PushConsumer {
    pub driver: Driver,
    pub msgs: Vec<Value>,
}

impl PushConsumer {
    /// Starts push_consumer.py (`extra` e.g. `--orderly`) and waits for it
    /// to report started.
    pub fn start(env: &ClientEnv, name: &str, topic: &str, group: &str, extra: &[&str]) -> Self {
        let mut args = vec!["--topic", topic, "--group", group];
        args.extend_from_slice(extra);
        let driver = Driver::spawn(env, name, "push_consumer.py", &args);
        driver.wait_event("started", Instant::now() + Duration::from_secs(30));
        PushConsumer {
            driver,
            msgs: Vec::new(),
        }
    }

    /// Reads one line into `msgs`; false when none came before `deadline`.
    pub fn poll(&mut self, deadline: Instant) -> bool {
        match self.driver.next(deadline) {
            Some(v) if v["event"] == "msg" => {
                self.msgs.push(v);
                true
            }
            Some(v) => panic!("{}: unexpected line {v}", self.driver.name),
            None => false,
        }
    }

    /// Reads until every key of `want` was received; panics past
    /// `deadline` naming what is still missing.
    pub fn until(&mut self, deadline: Instant, want: &[String]) {
        while !missing(&self.msgs, want).is_empty() {
            if !self.poll(deadline) {
                panic!(
                    "{}: {} of {} messages still missing (e.g. {:?}); {}",
                    self.driver.name,
                    missing(&self.msgs, want).len(),
                    want.len(),
                    missing(&self.msgs, want).iter().take(5).collect::<Vec<_>>(),
                    self.driver.stderr_tail()
                );
            }
        }
    }

    /// Reads lines until none arrives for `quiet` (late duplicates or
    /// strays show up here).
    pub fn settle(&mut self, quiet: Duration) {
        while self.poll(Instant::now() + quiet) {}
    }

    /// Stops the consumer; returns everything it received.
    pub fn stop(self) -> Vec<Value> {
        let name = self.driver.name.clone();
        let mut msgs = self.msgs;
        let (status, rest) = self.driver.finish(Instant::now() + Duration::from_secs(30));
        for v in rest {
            if v["event"] == "msg" {
                msgs.push(v);
            }
        }
        assert!(status.success(), "{name} exited with {status}");
        msgs
    }
}

/// Keys of `want` not yet among `msgs`.
pub fn missing<'a>(msgs: &[Value], want: &'a [String]) -> Vec<&'a String> {
    let got: std::collections::HashSet<&str> =
        msgs.iter().filter_map(|m| m["key"].as_str()).collect();
    want.iter().filter(|k| !got.contains(k.as_str())).collect()
}

/// How often each key was received.
pub fn key_counts(msgs: &[Value]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for m in msgs {
        *counts
            .entry(m["key"].as_str().unwrap_or_default().to_string())
            .or_insert(0) += 1;
    }
    counts
}

/// Messages whose key starts with `prefix-`.
pub fn with_prefix<'a>(msgs: &'a [Value], prefix: &str) -> Vec<&'a Value> {
    let p = format!("{prefix}-");
    msgs.iter()
        .filter(|m| m["key"].as_str().is_some_and(|k| k.starts_with(&p)))
        .collect()
}

/// Asserts that `msgs` hold each of `want` exactly once and nothing else.
pub fn assert_exactly(who: &str, msgs: &[&Value], want: &[String]) {
    let owned: Vec<Value> = msgs.iter().map(|m| (*m).clone()).collect();
    let counts = key_counts(&owned);
    let dups: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(dups.is_empty(), "{who}: received more than once: {dups:?}");
    let want_set: std::collections::BTreeSet<&str> = want.iter().map(String::as_str).collect();
    let extra: Vec<_> = counts
        .keys()
        .filter(|k| !want_set.contains(k.as_str()))
        .collect();
    assert!(extra.is_empty(), "{who}: received unexpected {extra:?}");
    let absent: Vec<_> = want_set
        .iter()
        .filter(|k| !counts.contains_key(**k))
        .collect();
    assert!(absent.is_empty(), "{who}: never received {absent:?}");
}

/// Runs produce.py to completion and returns its "sent" lines.
pub fn produce(env: &ClientEnv, name: &str, args: &[&str]) -> Vec<Value> {
    let d = Driver::spawn(env, name, "produce.py", args);
    let (status, lines) = d.finish(Instant::now() + Duration::from_secs(90));
    let done = lines.iter().find(|v| v["event"] == "done");
    let errors: Vec<_> = lines
        .iter()
        .filter(|v| v["event"] == "error" || v["event"] == "send_failed")
        .collect();
    assert!(
        status.success() && done.is_some_and(|d| d["ok"] == true) && errors.is_empty(),
        "{name} failed ({status}): {errors:?}"
    );
    lines.into_iter().filter(|v| v["event"] == "sent").collect()
}

/// Runs pull_consumer.py over every queue from offset 0; its messages.
pub fn pull_all(env: &ClientEnv, name: &str, topic: &str, group: &str) -> Vec<Value> {
    let d = Driver::spawn(
        env,
        name,
        "pull_consumer.py",
        &["--topic", topic, "--group", group],
    );
    let (status, lines) = d.finish(Instant::now() + Duration::from_secs(60));
    assert!(status.success(), "{name} exited with {status}");
    assert!(
        lines.iter().any(|v| v["event"] == "done"),
        "{name} did not finish"
    );
    lines.into_iter().filter(|v| v["event"] == "msg").collect()
}

/// Keys `prefix-0 .. prefix-(count-1)`, as produce.py names them.
pub fn keys(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}-{i}")).collect()
}
