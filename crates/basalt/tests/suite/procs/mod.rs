//! Helpers for tests that run real `basalt` processes on 127.0.0.1: free
//! ports, spawning with a readiness line, kill -9, and a guard that never
//! leaves a process behind.
#![allow(dead_code)]

pub mod ledger_group;
pub mod link_proxy;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A port that is free now, with the next one free too (a broker also binds
/// listenPort + 1 for HA).
pub fn free_port_pair() -> u16 {
    for _ in 0..100 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p = l.local_addr().unwrap().port();
        if p < 65000 && std::net::TcpListener::bind(("127.0.0.1", p + 1)).is_ok() {
            return p;
        }
    }
    panic!("no free port pair");
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running `basalt` process, killed (SIGKILL) when dropped.
pub struct Proc {
    pub name: String,
    child: Option<Child>,
    pub log: PathBuf,
}

impl Proc {
    /// Starts `basalt ARGS`, waits until a line of its stdout contains
    /// `ready`, and logs everything it prints to `log_dir/name.log`.
    pub fn spawn(name: &str, args: &[&str], ready: &str, log_dir: &Path) -> Proc {
        let log = log_dir.join(format!("{name}.log"));
        let mut child = Command::new(env!("CARGO_BIN_EXE_basalt"))
            .args(args)
            .env("BASALT_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        let (tx, rx) = mpsc::channel::<()>();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap();
        let file2 = file.try_clone().unwrap();
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
        let mut p = Proc {
            name: name.to_string(),
            child: Some(child),
            log,
        };
        if rx.recv_timeout(Duration::from_secs(60)).is_err() {
            let out = std::fs::read_to_string(&p.log).unwrap_or_default();
            p.kill9();
            panic!("{name} did not become ready; its output:\n{out}");
        }
        p
    }

    /// A NameServer on a free port of 127.0.0.1, with its address.
    pub fn namesrv(log_dir: &Path) -> (Proc, String) {
        let port = free_port();
        let p = Proc::spawn(
            "namesrv",
            &[
                "namesrv",
                "--port",
                &port.to_string(),
                "--listen",
                "127.0.0.1",
            ],
            "listening on",
            log_dir,
        );
        (p, format!("127.0.0.1:{port}"))
    }

    /// SIGKILL, as a crash.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// SIGTERM and wait (a clean shutdown), bounded.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            // SAFETY: plain kill(2) on our child's pid.
            unsafe { libc_kill(c.id() as i32, 15) };
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                if let Ok(Some(_)) = c.try_wait() {
                    return;
                }
                if Instant::now() > deadline {
                    let _ = c.kill();
                    let _ = c.wait();
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// SIGSTOP: the process stays, frozen, as under a long GC pause or a
    /// stalled VM.
    pub fn pause(&mut self) {
        self.signal(19);
    }

    /// SIGCONT after [`Proc::pause`].
    pub fn resume(&mut self) {
        self.signal(18);
    }

    fn signal(&mut self, sig: i32) {
        if let Some(c) = &self.child {
            // SAFETY: plain kill(2) on our child's pid.
            unsafe { libc_kill(c.id() as i32, sig) };
        }
    }

    /// Lines of this process's output that tracing logged at ERROR level.
    pub fn error_lines(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains(" ERROR "))
            .map(str::to_string)
            .collect()
    }

    pub fn is_running(&mut self) -> bool {
        match &mut self.child {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
        // A failing test leaves its temp dir behind for no one: show what the
        // process said last, so a CI log explains the failure.
        if std::thread::panicking() {
            let out = std::fs::read_to_string(&self.log).unwrap_or_default();
            let lines: Vec<&str> = out.lines().collect();
            let from = lines.len().saturating_sub(60);
            eprintln!("--- last lines of {} ---", self.name);
            for l in &lines[from..] {
                eprintln!("{l}");
            }
        }
    }
}

unsafe extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
}

/// Writes a broker.conf (properties) and returns its path. The disk-space
/// limits are off unless `pairs` set them (later keys win): tests must not
/// depend on how full the machine's disk is.
pub fn write_conf(dir: &Path, name: &str, pairs: &[(&str, String)]) -> PathBuf {
    let p = dir.join(format!("{name}.conf"));
    let mut text =
        String::from("diskSpaceWarningLevelRatio=100\ndiskSpaceCleanForciblyRatio=100\n");
    text.extend(pairs.iter().map(|(k, v)| format!("{k}={v}\n")));
    std::fs::write(&p, text).unwrap();
    p
}

/// Waits (bounded) for `f` to hold.
pub async fn eventually(what: &str, timeout: Duration, mut f: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    loop {
        if f().await {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
