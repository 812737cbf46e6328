//! Runs `basalt standalone` as a child process for black-box tests.
//!
//! [`Standalone`] owns the process: it is started on free loopback ports with
//! its own data directory, is ready once it prints "basalt standalone ready",
//! and is killed when dropped, so a failing test never leaks a broker. Its
//! stdout and stderr go to a log file that is printed when a test panics.

#![allow(dead_code)]

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Settings that turn the disk-space limits off (see docs/disk-space.md).
pub const NO_DISK_LIMITS: [&str; 2] = [
    "diskSpaceWarningLevelRatio=100",
    "diskSpaceCleanForciblyRatio=100",
];

/// How long a broker may take to print its ready line.
pub const START_DEADLINE: Duration = Duration::from_secs(30);
/// How long a clean shutdown (SIGTERM) may take.
pub const STOP_DEADLINE: Duration = Duration::from_secs(30);

/// Ports of one standalone process: the NameServer, the broker, and the
/// broker's HA port, which is always `broker + 1`.
#[derive(Debug, Clone, Copy)]
pub struct Ports {
    pub namesrv: u16,
    pub broker: u16,
}

impl Ports {
    pub fn namesrv_addr(&self) -> String {
        format!("127.0.0.1:{}", self.namesrv)
    }

    pub fn broker_addr(&self) -> String {
        format!("127.0.0.1:{}", self.broker)
    }
}

/// Ports handed out by this test process, never handed out twice (tests in
/// one binary run in parallel threads).
fn handed_out() -> &'static Mutex<HashSet<u16>> {
    static PORTS: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    PORTS.get_or_init(|| Mutex::new(HashSet::new()))
}

/// Three free ports: NameServer, broker and broker + 1 (HA). Each is bound
/// (so the kernel says it is free) and released just before returning. Other
/// processes may still race for them; [`Standalone::start`] retries with new
/// ports when the broker cannot bind.
pub fn free_ports() -> Ports {
    let mut taken = handed_out().lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..200 {
        let Ok(broker) = TcpListener::bind("127.0.0.1:0") else {
            continue;
        };
        let Ok(broker_port) = broker.local_addr().map(|a| a.port()) else {
            continue;
        };
        if broker_port == u16::MAX
            || taken.contains(&broker_port)
            || taken.contains(&(broker_port + 1))
        {
            continue;
        }
        let Ok(_ha) = TcpListener::bind(("127.0.0.1", broker_port + 1)) else {
            continue;
        };
        let Ok(namesrv) = TcpListener::bind("127.0.0.1:0") else {
            continue;
        };
        let Ok(namesrv_port) = namesrv.local_addr().map(|a| a.port()) else {
            continue;
        };
        if taken.contains(&namesrv_port) {
            continue;
        }
        taken.extend([broker_port, broker_port + 1, namesrv_port]);
        return Ports {
            namesrv: namesrv_port,
            broker: broker_port,
        };
    }
    panic!("no free loopback ports found");
}

/// A running `basalt standalone` process.
pub struct Standalone {
    child: Option<Child>,
    pub ports: Ports,
    pub data: PathBuf,
    log: PathBuf,
    extra: Vec<String>,
}

impl Standalone {
    /// Starts a broker on free ports over `data`, with `--set` overrides.
    /// Retries a few times with new ports if the process exits before it is
    /// ready (another process took a port).
    pub fn start(data: &Path, sets: &[&str]) -> Standalone {
        let mut last = String::new();
        for _ in 0..3 {
            let ports = free_ports();
            match Self::spawn(data, ports, sets) {
                Ok(s) => return s,
                Err(e) => last = e,
            }
        }
        panic!("basalt standalone did not start: {last}");
    }

    /// Starts a broker again on the same ports and data directory.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "restart a stopped broker only");
        let sets: Vec<&str> = self.extra.iter().map(String::as_str).collect();
        match Self::spawn(&self.data, self.ports, &sets) {
            Ok(mut s) => {
                self.child = s.child.take();
                self.keep_log();
                self.log = s.log.clone();
            }
            Err(e) => panic!("basalt standalone did not restart: {e}"),
        }
    }

    fn spawn(data: &Path, ports: Ports, sets: &[&str]) -> Result<Standalone, String> {
        static RUN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = RUN.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = data
            .parent()
            .unwrap_or(data)
            .join(format!("basalt-{}-{n}.log", ports.broker));
        let log_file =
            std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err_file = log_file
            .try_clone()
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let mut cmd = Command::new(broker_binary());
        cmd.arg("standalone")
            .arg("--data")
            .arg(data)
            .args(["--namesrv-port", &ports.namesrv.to_string()])
            .args(["--port", &ports.broker.to_string()])
            .args(["--listen", "127.0.0.1", "--advertise", "127.0.0.1"]);
        // Tests must not depend on how full the machine's disk is; a test of
        // disk space sets these itself (later settings win).
        for s in NO_DISK_LIMITS.iter().chain(sets) {
            cmd.args(["--set", s]);
        }
        cmd.env(
            "BASALT_LOG",
            std::env::var("BASALT_LOG").unwrap_or_else(|_| "info".into()),
        )
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(err_file));
        let mut child = cmd.spawn().map_err(|e| format!("spawn: {e}"))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        // A thread copies stdout into the log and reports the ready line.
        let (tx, rx) = mpsc::channel();
        let mut log_out = log_file;
        std::thread::spawn(move || {
            use std::io::Write;
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            let mut tx = Some(tx);
            loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let _ = log_out.write_all(line.as_bytes());
                        if line.contains("basalt standalone ready")
                            && let Some(tx) = tx.take()
                        {
                            let _ = tx.send(());
                        }
                    }
                }
            }
        });
        let mut s = Standalone {
            child: Some(child),
            ports,
            data: data.to_path_buf(),
            log,
            extra: sets.iter().map(|s| s.to_string()).collect(),
        };
        match rx.recv_timeout(START_DEADLINE) {
            Ok(()) => Ok(s),
            Err(_) => {
                s.kill();
                Err(format!(
                    "not ready within {START_DEADLINE:?}; log:\n{}",
                    s.log_text()
                ))
            }
        }
    }

    pub fn namesrv_addr(&self) -> String {
        self.ports.namesrv_addr()
    }

    pub fn broker_addr(&self) -> String {
        self.ports.broker_addr()
    }

    /// The process output so far.
    pub fn log_text(&self) -> String {
        let mut s = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut s);
        }
        s
    }

    /// Sends SIGTERM and waits for a clean exit; panics if the process does
    /// not exit in time or exits with an error.
    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id() as libc::pid_t;
        // SAFETY: `pid` is our own child, which has not been reaped yet.
        let rc = unsafe { libc::kill(pid, libc::SIGTERM) };
        assert_eq!(rc, 0, "SIGTERM to basalt {pid}");
        // A helper thread blocks in `wait`, so no polling is needed.
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        match rx.recv_timeout(STOP_DEADLINE) {
            Ok(Ok(st)) => assert!(
                st.success(),
                "basalt exited with {st} after SIGTERM; log:\n{}",
                self.log_text()
            ),
            Ok(Err(e)) => panic!("waiting for basalt: {e}"),
            Err(_) => {
                // SAFETY: the helper thread has not reaped the child yet.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!(
                    "basalt did not stop within {STOP_DEADLINE:?} after SIGTERM; log:\n{}",
                    self.log_text()
                );
            }
        }
    }

    /// With BASALT_TEST_LOG_DIR set, copies the current log there (the
    /// temporary directory goes away with the test).
    fn keep_log(&self) {
        if let (Some(keep), Some(name)) = (
            std::env::var_os("BASALT_TEST_LOG_DIR"),
            self.log.file_name(),
        ) {
            let _ = std::fs::copy(&self.log, Path::new(&keep).join(name));
        }
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }
}

impl Drop for Standalone {
    fn drop(&mut self) {
        self.kill();
        self.keep_log();
        if std::thread::panicking() {
            let text = self.log_text();
            let tail: Vec<&str> = text.lines().rev().take(80).collect();
            eprintln!("---- basalt log ({}), last lines ----", self.log.display());
            for l in tail.iter().rev() {
                eprintln!("{l}");
            }
        }
    }
}

/// Runs `basalt store check DIR` and returns (success, output).
pub fn store_check(data: &Path) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(["store", "check"])
        .arg(data)
        .output()
        .expect("run basalt store check");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Time left until `deadline` (zero when passed).
pub fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// A field of `/proc/PID/status` in kB (VmRSS, RssAnon, ...).
pub fn proc_status_kb(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// The `basalt` binary to start as the broker: the one built with these
/// tests, or `BASALT_TEST_BROKER_BIN` (to run the same tests against another
/// build, for example to show that a case fails on an older one).
pub fn broker_binary() -> PathBuf {
    std::env::var_os("BASALT_TEST_BROKER_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_basalt")))
}
