//! What the command-line tools print: the configuration rules of
//! `basalt standalone` / `basalt broker` (a file's values are kept unless a
//! flag is given, typos are reported with a suggestion, `--print-config`
//! names each value's source) and the live progress of `produce -n` /
//! `consume -n`, under a pseudo-terminal (`script` from util-linux) and
//! without one.

use crate::standalone;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use standalone::{Standalone, broker_binary, free_ports};

fn basalt(args: &[&str]) -> Output {
    Command::new(broker_binary())
        .args(args)
        .env("BASALT_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("run basalt")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn write(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, body).expect("write config");
    p.display().to_string()
}

/// The `--print-config` row of `key`: (value, source).
fn row(table: &str, key: &str) -> (String, String) {
    let line = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(key))
        .unwrap_or_else(|| panic!("no {key} in\n{table}"));
    let mut cols = line.split_whitespace().skip(1);
    let value = cols.next().unwrap_or_default().to_string();
    (value, cols.collect::<Vec<_>>().join(" "))
}

#[test]
fn standalone_keeps_the_files_port_and_store() {
    let dir = tempfile::tempdir().unwrap();
    let ports = free_ports();
    let store = dir.path().join("from-file");
    let conf = write(
        dir.path(),
        "broker.conf",
        &format!(
            "listenPort={}\nlistenAddr=127.0.0.1\nstorePathRootDir={}\n\
             diskSpaceWarningLevelRatio=100\ndiskSpaceCleanForciblyRatio=100\n",
            ports.broker,
            store.display()
        ),
    );
    let ns_port = ports.namesrv.to_string();
    let mut child = Command::new(broker_binary())
        .args(["standalone", "-c", &conf, "--namesrv-port", &ns_port])
        .env("BASALT_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn standalone");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + standalone::START_DEADLINE;
    let mut seen = Vec::new();
    while !seen.iter().any(|l: &String| l.starts_with("  flush")) {
        match rx.recv_timeout(standalone::left(deadline)) {
            Ok(l) => seen.push(l),
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let out = seen.join("\n");
    assert!(out.contains("basalt standalone ready"), "{out}");
    let listening = format!("listening on 127.0.0.1:{}", ports.broker);
    assert!(out.contains(&listening), "{out}");
    assert!(
        out.contains(&format!("store    {}", store.display())),
        "{out}"
    );
    assert!(store.join("commitlog").is_dir(), "no store at {store:?}");
}

#[test]
fn print_config_names_each_source() {
    let dir = tempfile::tempdir().unwrap();
    let conf = write(
        dir.path(),
        "broker.conf",
        "listenPort=20911\nbrokerName=from-file\nflushDiskType=SYNC_FLUSH\n",
    );
    let o = basalt(&[
        "standalone",
        "-c",
        &conf,
        "--port",
        "30911",
        "--set",
        "brokerName=from-set",
        "--print-config",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let t = text(&o.stdout);
    assert_eq!(
        row(&t, "listenPort"),
        ("30911".into(), "flag --port".into())
    );
    assert_eq!(row(&t, "brokerName"), ("from-set".into(), "--set".into()));
    assert_eq!(
        row(&t, "flushDiskType"),
        ("SYNC_FLUSH".into(), format!("file {conf}"))
    );
    assert_eq!(
        row(&t, "storePathRootDir"),
        ("./basalt-data".into(), "standalone default".into())
    );
    assert_eq!(row(&t, "maxMessageSize").1, "default");
    // Without the flag the file's port stays.
    let o = basalt(&["standalone", "-c", &conf, "--print-config"]);
    let t = text(&o.stdout);
    assert_eq!(
        row(&t, "listenPort"),
        ("20911".into(), format!("file {conf}"))
    );
}

#[test]
fn a_typo_is_reported_with_its_suggestion() {
    let dir = tempfile::tempdir().unwrap();
    let conf = write(
        dir.path(),
        "broker.conf",
        "brokerName=b\nflushDiskTyp=SYNC_FLUSH\nsendMessageThreadPoolNums=16\n",
    );
    let o = basalt(&[
        "broker",
        "-c",
        &conf,
        "--set",
        "lisenPort=1",
        "--print-config",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("unknown setting flushDiskTyp") && err.contains("did you mean flushDiskType?"),
        "{err}"
    );
    assert!(err.contains("did you mean listenPort?"), "{err}");
    assert!(
        err.contains("sendMessageThreadPoolNums") && err.contains("Basalt ignores"),
        "{err}"
    );
    // The typo did not set anything.
    assert_eq!(row(&text(&o.stdout), "flushDiskType").0, "ASYNC_FLUSH");
    let o = basalt(&["broker", "-c", &conf, "--strict", "--print-config"]);
    assert!(!o.status.success(), "--strict started with a typo");
    assert!(text(&o.stderr).contains("--strict"), "{}", text(&o.stderr));
    // Deliberately ignored keys alone pass --strict.
    let conf = write(dir.path(), "ok.conf", "sendMessageThreadPoolNums=16\n");
    let o = basalt(&["broker", "-c", &conf, "--strict", "--print-config"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// Runs basalt with `args` under a pseudo-terminal; what it wrote there.
fn under_pty(args: &[&str]) -> String {
    let cmd = std::iter::once(broker_binary().display().to_string())
        .chain(args.iter().map(|a| a.to_string()))
        .collect::<Vec<_>>()
        .join(" ");
    let o = Command::new("script")
        .args(["-qfec", &cmd, "/dev/null"])
        .env("BASALT_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .expect("run script (util-linux)");
    assert!(o.status.success(), "{cmd}: {}", text(&o.stderr));
    text(&o.stdout)
}

#[test]
fn progress_on_a_terminal_and_nothing_extra_without_one() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("skipped: `script` (util-linux) is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let broker = Standalone::start(&dir.path().join("data"), &[]);
    let ns = broker.namesrv_addr();
    // Each run has a topic of its own, so a consumer of all 300 stops at 300.
    let produce = |topic: &'static str| ["produce", "--namesrv", &ns, "-t", topic, "-n", "300"];
    let tty = under_pty(&produce("ProgressTty"));
    assert!(tty.contains("\r\x1b[2Ksent 300/300 (100%)"), "{tty:?}");
    assert!(tty.contains("sent 300, failed 0"), "{tty:?}");
    let piped = basalt(&produce("ProgressPipe"));
    assert!(piped.status.success());
    assert_eq!(text(&piped.stdout), "sent 300, failed 0\n");
    assert!(
        !text(&piped.stderr).contains('\r'),
        "{:?}",
        text(&piped.stderr)
    );

    let consume = |topic: &'static str| {
        [
            "consume",
            "--namesrv",
            &ns,
            "-t",
            topic,
            "-g",
            "progress",
            "-n",
            "300",
            "--quiet",
            "--timeout",
            "20",
        ]
        .map(String::from)
    };
    let args = consume("ProgressTty");
    let tty = under_pty(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(tty.contains("\r\x1b[2Kconsumed 300/300 (100%)"), "{tty:?}");
    let args = consume("ProgressPipe");
    let piped = basalt(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(text(&piped.stdout), "consumed 300\n");
    assert!(
        !text(&piped.stderr).contains('\r'),
        "{:?}",
        text(&piped.stderr)
    );

    // --json: one object, also on a terminal, and no progress line.
    let mut args = produce("ProgressJson").to_vec();
    args.push("--json");
    let tty = under_pty(&args);
    assert!(!tty.contains("sent 300/300"), "{tty:?}");
    let v: serde_json::Value = serde_json::from_str(tty.trim()).expect("one JSON object");
    assert_eq!(v["sent"], 300);
    assert_eq!(v["failed"], 0);
}

/// The keys of the messages `basalt consume` printed, in order.
fn printed_keys(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| l.split(" keys=").nth(1))
        .filter_map(|rest| rest.split(' ').next())
        .map(str::to_string)
        .collect()
}

/// `consume -n N` prints exactly N messages and commits offsets only for
/// those: the group's next run starts at the next message.
#[test]
fn consume_count_stops_at_n_and_the_next_run_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let broker = Standalone::start(&dir.path().join("data"), &[]);
    let ns = broker.namesrv_addr();
    let topic = "CountedOneQueue";
    let o = basalt(&[
        "admin",
        "--namesrv",
        &ns,
        "topic",
        "create",
        "-t",
        topic,
        "--queues",
        "1",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let o = basalt(&[
        "produce",
        "--namesrv",
        &ns,
        "-t",
        topic,
        "-n",
        "50",
        "--keys",
        "k-{i}",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "sent 50, failed 0\n");
    let consume_7 = || {
        let o = basalt(&[
            "consume",
            "--namesrv",
            &ns,
            "-t",
            topic,
            "-g",
            "counted",
            "-n",
            "7",
            "--no-body",
            "--timeout",
            "60",
        ]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        let out = text(&o.stdout);
        println!("consume -n 7 printed:\n{out}");
        assert!(out.ends_with("consumed 7\n"), "{out}");
        printed_keys(&out)
    };
    let want = |r: std::ops::Range<usize>| r.map(|i| format!("k-{i}")).collect::<Vec<_>>();
    assert_eq!(consume_7(), want(0..7), "first run");
    assert_eq!(
        consume_7(),
        want(7..14),
        "second run starts where the first stopped"
    );

    // --queue: the same count, and the next offset is the first unprinted.
    let o = basalt(&[
        "consume",
        "--namesrv",
        &ns,
        "-t",
        topic,
        "--queue",
        "0",
        "--offset",
        "3",
        "-n",
        "5",
        "--no-body",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    println!("consume --queue 0 --offset 3 -n 5 printed:\n{out}");
    assert_eq!(printed_keys(&out), want(3..8));
    assert!(out.ends_with("consumed 5, next offset 8\n"), "{out}");
}
