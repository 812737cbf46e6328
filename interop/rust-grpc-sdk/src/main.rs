//! `rustgrpcsdk` runs self-checking cases of the RocketMQ 5 gRPC SDK for
//! Rust (crate `rocketmq` 5.0.0) against one Basalt broker's gRPC
//! MessagingService:
//!
//! ```text
//! rustgrpcsdk --endpoint 127.0.0.1:8081 [--tls] CASE...
//! ```
//!
//! Each case owns topic `rs-CASE` and consumer group `rg-CASE` (the test
//! creates the topics). Every case prints what it sent (SENT) and received
//! (RECV), counts exactly (COUNT) and fails unless each message arrived
//! exactly once, as sent, and, where the case says so, in order or at the
//! right time. The last line is ALL PASSED, or FAILED naming the failed
//! cases, with exit status 1.
//!
//! The clients run with the SDK's defaults but for the endpoint: plain
//! text (`enable_tls` is false unless `--tls`), a 3 s request timeout and
//! a 40 s long polling time, which is also the receive call's deadline
//! (Basalt polls at most 30 s of it).

mod bench;
mod cases;
mod consume;

use std::time::{Duration, Instant};

use rocketmq::conf::{ClientOption, ProducerOption, SimpleConsumerOption};
use rocketmq::error::ClientError;
use rocketmq::model::transaction::TransactionChecker;
use rocketmq::{Producer, SimpleConsumer};

/// What every client connects to, from the command line.
#[derive(Clone, Debug)]
pub struct Target {
    /// The broker's gRPC `host:port`.
    pub endpoint: String,
    /// Whether the SDK dials TLS (`set_enable_tls(true)`).
    pub tls: bool,
    /// A long polling time other than the SDK's default 40 s.
    pub long_polling: Option<Duration>,
}

/// A case's result: `Err` says what went wrong.
pub type Outcome = Result<(), String>;

const USAGE: &str = "usage: rustgrpcsdk --endpoint HOST:PORT [--tls] [--long-polling-secs N] CASE...\n\
     or: rustgrpcsdk --endpoint HOST:PORT bench-send|bench-consume ARGS... (src/bench.rs)";

/// The cases by name.
const CASES: &[&str] = &["normal", "fifo", "delay", "transaction", "invisible"];

async fn run_case(target: &Target, name: &str) -> Outcome {
    match name {
        "normal" => cases::normal(target).await,
        "fifo" => cases::fifo(target).await,
        "delay" => cases::delay(target).await,
        "transaction" => cases::transaction(target).await,
        "invisible" => cases::invisible(target).await,
        _ => Err(format!("unknown case (known: {})", CASES.join(", "))),
    }
}

/// The endpoint, the TLS flag and the case names of the command line.
fn parse_args() -> Result<(Target, Vec<String>), String> {
    let mut target = Target {
        endpoint: "127.0.0.1:8081".to_string(),
        tls: false,
        long_polling: None,
    };
    let mut names = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--endpoint" => target.endpoint = args.next().ok_or(USAGE)?,
            "--tls" => target.tls = true,
            "--long-polling-secs" => {
                let secs = args.next().and_then(|n| n.parse().ok()).ok_or(USAGE)?;
                target.long_polling = Some(Duration::from_secs(secs));
            }
            s if s.starts_with("--") => return Err(format!("unknown option {s}; {USAGE}")),
            _ => names.push(a),
        }
    }
    if names.is_empty() {
        return Err(USAGE.to_string());
    }
    Ok((target, names))
}

#[tokio::main]
async fn main() {
    let (target, names) = match parse_args() {
        Ok(parsed) => parsed,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if let Some(mode @ ("bench-send" | "bench-consume")) = names.first().map(String::as_str) {
        let done = if mode == "bench-send" {
            bench::send(&target, &names[1..]).await
        } else {
            bench::consume(&target, &names[1..]).await
        };
        if let Err(e) = done {
            eprintln!("{mode}: {e}");
            std::process::exit(1);
        }
        return;
    }
    let mut failed = Vec::new();
    for name in &names {
        let start = Instant::now();
        match run_case(&target, name).await {
            Ok(()) => println!("CASE {name} PASSED in {} ms", start.elapsed().as_millis()),
            Err(e) => {
                println!("CASE {name} FAILED: {e}");
                failed.push(name.clone());
            }
        }
    }
    if !failed.is_empty() {
        println!("FAILED: {failed:?}");
        std::process::exit(1);
    }
    println!("ALL PASSED");
}

/// The client option of every producer and consumer: the endpoint, TLS as
/// asked, everything else the SDK's default.
fn client_option(target: &Target) -> ClientOption {
    let mut o = ClientOption::default();
    o.set_access_url(target.endpoint.clone());
    o.set_enable_tls(target.tls);
    if let Some(d) = target.long_polling {
        o.set_long_polling_timeout(d);
    }
    o
}

/// A started producer of `topic` (a transaction producer when `checker`
/// is given).
pub async fn producer(
    target: &Target,
    topic: &str,
    checker: Option<Box<TransactionChecker>>,
) -> Result<Producer, String> {
    let mut option = ProducerOption::default();
    option.set_topics(vec![topic]);
    let made = match checker {
        Some(c) => Producer::new_transaction_producer(option, client_option(target), c),
        None => Producer::new(option, client_option(target)),
    };
    let mut p = made.map_err(|e| format!("new producer of {topic}: {e}"))?;
    p.start()
        .await
        .map_err(|e| format!("start producer of {topic}: {}", why(&e)))?;
    Ok(p)
}

/// A started SimpleConsumer of `group`, with `topic`'s route fetched.
pub async fn consumer(target: &Target, group: &str, topic: &str) -> Result<SimpleConsumer, String> {
    let mut option = SimpleConsumerOption::default();
    option.set_consumer_group(group);
    option.set_topics(vec![topic]);
    let mut c = SimpleConsumer::new(option, client_option(target))
        .map_err(|e| format!("new simple consumer of {group}: {e}"))?;
    c.start()
        .await
        .map_err(|e| format!("start simple consumer of {group}: {}", why(&e)))?;
    Ok(c)
}

/// An SDK error with the whole chain of its causes (its own text names
/// only the first, e.g. a bare "transport error").
pub fn why(e: &ClientError) -> String {
    let mut text = e.to_string();
    if let Some(source) = e.source() {
        for cause in source.chain().skip(1) {
            text.push_str(&format!(": {cause}"));
        }
    }
    text
}

/// Stops a producer (NotifyClientTermination), reporting, not failing on,
/// an error.
pub async fn stop_producer(p: Producer) {
    if let Err(e) = p.shutdown().await {
        println!("STOP producer: {e}");
    }
}

/// Stops a SimpleConsumer, reporting, not failing on, an error.
pub async fn stop_consumer(c: SimpleConsumer) {
    if let Err(e) = c.shutdown().await {
        println!("STOP consumer: {e}");
    }
}
