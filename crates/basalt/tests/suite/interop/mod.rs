//! Shared harness of the reference-interop suites: the official Java client
//! (4.9.x and 5.x), `mqadmin`, the Java broker, the Go client and the 5.x
//! gRPC SDKs (Java, Go, Python), each built by `interop/<family>/prepare.sh`
//! into `target/interop/<family>/`
//! (`interop/prepare.sh` runs them all; `scripts/test.sh` runs that first).
//!
//! A test asks for a family's artifacts with [`family_dir`]. When they are
//! missing it skips, printing why, unless `BASALT_INTEROP_REQUIRED=1` (CI
//! sets it), when a missing harness is a failure. Every child process runs
//! bounded in time through [`run_bounded`]; its output is kept whole so a
//! failing case shows what it sent and what it received.

#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The workspace's root directory (two levels above this crate).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("workspace root")
}

/// Where the families' harnesses are built: `BASALT_INTEROP_DIR`, or
/// `target/interop` under the workspace.
pub fn interop_root() -> PathBuf {
    match std::env::var_os("BASALT_INTEROP_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => workspace_root().join("target").join("interop"),
    }
}

/// The built harness of `family` (its `prepare.sh` writes `READY` last),
/// or `None` after printing why the test skips. Panics instead when
/// `BASALT_INTEROP_REQUIRED=1`.
pub fn family_dir(family: &str) -> Option<PathBuf> {
    let dir = interop_root().join(family);
    if dir.join("READY").is_file() {
        return Some(dir);
    }
    let why = format!(
        "the {family} harness is not built ({} has no READY); run interop/prepare.sh \
         (it needs Java 17 + Maven, Go, python3 with venv and Node.js + npm, and Maven \
         Central / the Go module proxy / PyPI / the npm registry / crates.io once)",
        dir.display()
    );
    if std::env::var("BASALT_INTEROP_REQUIRED").as_deref() == Ok("1") {
        panic!("{why}");
    }
    eprintln!("SKIPPED: {why}");
    None
}

/// What a bounded child printed, and how it ended.
#[derive(Debug)]
pub struct Finished {
    /// `None` when the child was killed at its deadline.
    pub status: Option<ExitStatus>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Finished {
    /// Whether the child exited with status 0 before its deadline.
    pub fn success(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// A report of the whole run, for an assertion message.
    pub fn report(&self, what: &str) -> String {
        let ended = match self.status {
            Some(s) => format!("{s}"),
            None => "killed at its deadline".to_string(),
        };
        format!(
            "{what}: {ended} after {:.1} s\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.elapsed.as_secs_f64(),
            self.stdout,
            self.stderr
        )
    }

    /// Panics with the whole report unless the child succeeded; prints its
    /// stdout either way (nextest shows it for a failing test).
    pub fn expect_success(self, what: &str) -> Finished {
        if !self.success() {
            panic!("{}", self.report(what));
        }
        println!("{}", self.report(what));
        self
    }
}

/// Runs `cmd` with stdin closed, killing it after `deadline`. Its stdout and
/// stderr are read concurrently so neither pipe can fill and stall it.
pub fn run_bounded(cmd: &mut Command, deadline: Duration) -> Finished {
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("wait for {cmd:?}: {e}"),
        }
    };
    Finished {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        elapsed: started.elapsed(),
    }
}

/// Reads a pipe to its end on a thread of its own.
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(mut p) = pipe {
            let mut bytes = Vec::new();
            let _ = p.read_to_end(&mut bytes);
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
        text
    })
}

/// The `java` to run: `$JAVA_HOME/bin/java` when set, else the one on PATH.
pub fn java() -> PathBuf {
    match std::env::var_os("JAVA_HOME") {
        Some(home) => Path::new(&home).join("bin").join("java"),
        None => PathBuf::from("java"),
    }
}

/// A `java` command with the classpath that `family`'s prepare.sh wrote to
/// `<dir>/<name>.classpath` (one line, `:`-separated), a small heap, and
/// the given main class.
pub fn java_command(dir: &Path, name: &str, main_class: &str) -> Command {
    let cp_file = dir.join(format!("{name}.classpath"));
    let cp = std::fs::read_to_string(&cp_file)
        .unwrap_or_else(|e| panic!("read {}: {e}", cp_file.display()));
    let mut cmd = Command::new(java());
    cmd.arg("-Xms64m")
        .arg("-Xmx256m")
        .arg("-XX:+UseSerialGC")
        .arg("-XX:TieredStopAtLevel=1")
        .arg("-cp")
        .arg(cp.trim())
        .arg(main_class);
    cmd
}
