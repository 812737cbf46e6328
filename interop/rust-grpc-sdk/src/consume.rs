//! Sending and receiving as the cases do it: every send and every received
//! message is printed, and a receive loop counts exactly.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rocketmq::model::common::{FilterExpression, FilterType};
use rocketmq::model::message::{Message, MessageView};
use rocketmq::{Producer, SimpleConsumer};

/// The invisible time of the receives that ack at once.
pub const RECEIVE_INVISIBLE: Duration = Duration::from_secs(20);

/// One message as a case saw it.
#[derive(Clone, Debug)]
pub struct Received {
    pub id: String,
    pub topic: String,
    pub body: String,
    pub tag: String,
    pub keys: Vec<String>,
    pub props: BTreeMap<String, String>,
    pub group: String,
    pub attempt: i32,
    /// Seconds since the epoch (the SDK keeps whole seconds).
    pub born: i64,
    pub born_host: String,
    /// Seconds since the epoch, for a delay message.
    pub due: Option<i64>,
    /// Milliseconds since the epoch, when the receive returned it.
    pub at_ms: i64,
}

/// Milliseconds since the epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// What a received message carried, for checks and printing.
pub fn describe(m: &MessageView) -> Received {
    Received {
        id: m.message_id().to_string(),
        topic: m.topic().to_string(),
        body: String::from_utf8_lossy(m.body()).into_owned(),
        tag: m.tag().unwrap_or("").to_string(),
        keys: m.keys().to_vec(),
        props: m
            .properties()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        group: m.message_group().unwrap_or("").to_string(),
        attempt: m.delivery_attempt(),
        born: m.born_timestamp(),
        born_host: m.born_host().to_string(),
        due: m.delivery_timestamp(),
        at_ms: now_ms(),
    }
}

fn print_recv(label: &str, r: &Received, extra: &str) {
    println!(
        "RECV {label}{extra} id={} body={} tag={} keys={:?} props={:?} group={} attempt={}",
        r.id, r.body, r.tag, r.keys, r.props, r.group, r.attempt
    );
}

/// Sends `m` (whose body is `body`, for printing) and returns its message
/// id.
pub async fn send(
    label: &str,
    p: &Producer,
    m: impl Message,
    body: &str,
) -> Result<String, String> {
    let receipt = p
        .send(m)
        .await
        .map_err(|e| format!("{label}: send {body}: {e}"))?;
    println!("SENT {label} id={} body={body}", receipt.message_id());
    Ok(receipt.message_id().to_string())
}

/// One receive of up to `batch` messages of every tag of `topic`; an empty
/// one (MESSAGE_NOT_FOUND) is an empty vector, as the SDK returns it.
pub async fn receive(
    c: &SimpleConsumer,
    topic: &str,
    batch: i32,
    invisible: Duration,
) -> Result<Vec<MessageView>, String> {
    let all = FilterExpression::new(FilterType::Tag, "*");
    c.receive_with(topic, &all, batch, invisible)
        .await
        .map_err(|e| format!("receive from {topic}: {e}"))
}

/// Acks `m`; the SDK returns the answer's status as an error.
pub async fn ack(label: &str, c: &SimpleConsumer, m: &MessageView) -> Result<(), String> {
    c.ack(m)
        .await
        .map_err(|e| format!("{label}: ack {}: {e}", m.message_id()))
}

/// Receives and acks until `expected` messages came (or `deadline`
/// passed), then makes `settle` more receives (each a whole long poll when
/// nothing comes) that must be empty. Returns the messages in arrival
/// order; fails on a duplicate message id, a failed receive or ack, or a
/// count other than `expected`.
pub async fn receive_exactly(
    label: &str,
    c: &SimpleConsumer,
    topic: &str,
    expected: usize,
    deadline: Duration,
    settle: usize,
) -> Result<Vec<Received>, String> {
    let mut got: Vec<Received> = Vec::new();
    let mut ids = HashSet::new();
    let end = Instant::now() + deadline;
    while got.len() < expected && Instant::now() < end {
        for m in receive(c, topic, 16, RECEIVE_INVISIBLE).await? {
            let r = describe(&m);
            print_recv(label, &r, "");
            if !ids.insert(r.id.clone()) {
                return Err(format!("{label}: duplicate message {}", r.id));
            }
            ack(label, c, &m).await?;
            got.push(r);
        }
    }
    for _ in 0..settle {
        let started = Instant::now();
        let extra = receive(c, topic, 16, RECEIVE_INVISIBLE).await?;
        for m in &extra {
            print_recv(label, &describe(m), " EXTRA");
            let _ = c.ack(m).await;
        }
        if !extra.is_empty() {
            return Err(format!(
                "{label}: received more than the {expected} messages expected"
            ));
        }
        println!(
            "EMPTY {label} receive after {} ms",
            started.elapsed().as_millis()
        );
    }
    println!("COUNT {label} received={} expected={expected}", got.len());
    if got.len() != expected {
        return Err(format!("{label}: received {} of {expected}", got.len()));
    }
    Ok(got)
}

/// Receives one message at a time until one comes (at most `deadline`).
pub async fn receive_one(
    c: &SimpleConsumer,
    topic: &str,
    invisible: Duration,
    deadline: Duration,
) -> Result<MessageView, String> {
    let end = Instant::now() + deadline;
    while Instant::now() < end {
        let mut views = receive(c, topic, 1, invisible).await?;
        if views.len() > 1 {
            return Err(format!("asked for one message, got {}", views.len()));
        }
        if let Some(m) = views.pop() {
            return Ok(m);
        }
    }
    Err(format!("no message within {deadline:?}"))
}

/// Fails unless `got` holds exactly the messages `sent` (message id to
/// body), each with its own body.
pub fn same_messages(
    label: &str,
    sent: &HashMap<String, String>,
    got: &[Received],
) -> Result<(), String> {
    let mut want: Vec<&str> = sent.values().map(String::as_str).collect();
    let mut have: Vec<&str> = got.iter().map(|r| r.body.as_str()).collect();
    want.sort_unstable();
    have.sort_unstable();
    if want != have {
        return Err(format!("{label}: sent {want:?}, received {have:?}"));
    }
    for r in got {
        match sent.get(&r.id) {
            Some(b) if *b == r.body => {}
            Some(b) => {
                return Err(format!(
                    "{label}: {} came with body {}, sent with {b}",
                    r.id, r.body
                ))
            }
            None => {
                return Err(format!(
                    "{label}: {} ({}) is no message id sent",
                    r.id, r.body
                ))
            }
        }
    }
    Ok(())
}
