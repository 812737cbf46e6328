//! The cases. Each starts its clients, runs its checks and stops the
//! clients whatever the checks found.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use rocketmq::model::message::{MessageBuilder, MessageView};
use rocketmq::model::transaction::{Transaction, TransactionResolution};
use rocketmq::{Producer, SimpleConsumer};

use crate::consume::{
    ack, describe, now_ms, receive_exactly, receive_one, same_messages, send, Received,
};
use crate::{consumer, producer, stop_consumer, stop_producer, Outcome, Target};

/// Starts a producer of `topic` and a SimpleConsumer of `group`, runs
/// `body` with them, then stops both.
macro_rules! with_clients {
    ($target:expr, $topic:expr, $group:expr, $checker:expr, $body:ident) => {{
        let p = producer($target, $topic, $checker).await?;
        let c = match consumer($target, $group, $topic).await {
            Ok(c) => c,
            Err(e) => {
                stop_producer(p).await;
                return Err(e);
            }
        };
        let outcome = $body(&p, &c).await;
        stop_consumer(c).await;
        stop_producer(p).await;
        outcome
    }};
}

fn build(b: MessageBuilder) -> Result<impl rocketmq::model::message::Message, String> {
    b.build().map_err(|e| format!("build message: {e}"))
}

/// `normal`: 20 messages with a tag, two keys and a user property; each is
/// received and acked exactly once and comes back with all of it.
pub async fn normal(target: &Target) -> Outcome {
    with_clients!(target, "rs-normal", "rg-normal", None, normal_body)
}

async fn normal_body(p: &Producer, c: &SimpleConsumer) -> Outcome {
    const T: &str = "rs-normal";
    const N: usize = 20;
    let mut sent = HashMap::new();
    for i in 0..N {
        let body = format!("normal-{i}");
        let m = MessageBuilder::builder()
            .set_topic(T)
            .set_body(body.clone().into_bytes())
            .set_tag("tagA")
            .set_keys(vec![format!("key-{i}"), "both".to_string()])
            .set_properties(HashMap::from([("index", i.to_string())]));
        let id = send("normal", p, build(m)?, &body).await?;
        sent.insert(id, body);
    }
    let got = receive_exactly("normal", c, T, N, Duration::from_secs(60), 1).await?;
    let now_s = now_ms() / 1000;
    for r in &got {
        let i = r.body.trim_start_matches("normal-");
        let want = format!(
            "topic={T} tag=tagA keys=[\"key-{i}\", \"both\"] props={{\"index\": \"{i}\"}} group= attempt=1"
        );
        let have = format!(
            "topic={} tag={} keys={:?} props={:?} group={} attempt={}",
            r.topic, r.tag, r.keys, r.props, r.group, r.attempt
        );
        if have != want {
            return Err(format!(
                "normal: {} came back with {have}, sent with {want}",
                r.body
            ));
        }
        if r.born <= 0 || now_s - r.born > 60 || r.born - now_s > 1 || r.born_host.is_empty() {
            return Err(format!(
                "normal: {} has born timestamp {} s (now {now_s} s), born host {:?}",
                r.body, r.born, r.born_host
            ));
        }
    }
    same_messages("normal", &sent, &got)
}

/// `fifo`: three message groups of five, sent interleaved; each group
/// comes back in send order, each message carrying its group.
pub async fn fifo(target: &Target) -> Outcome {
    with_clients!(target, "rs-fifo", "rg-fifo", None, fifo_body)
}

async fn fifo_body(p: &Producer, c: &SimpleConsumer) -> Outcome {
    const T: &str = "rs-fifo";
    const GROUPS: [&str; 3] = ["ga", "gb", "gc"];
    let mut sent = HashMap::new();
    for i in 0..5 {
        for g in GROUPS {
            let body = format!("{g}:{i}");
            let m =
                MessageBuilder::fifo_message_builder(T, body.clone().into_bytes(), g).set_tag("f");
            let id = send("fifo", p, build(m)?, &body).await?;
            sent.insert(id, body);
        }
    }
    let got = receive_exactly("fifo", c, T, 15, Duration::from_secs(60), 1).await?;
    let mut by_group: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for r in &got {
        let g = r.body.split(':').next().unwrap_or("");
        if r.group != g {
            return Err(format!(
                "fifo: {} came with message group {:?}",
                r.body, r.group
            ));
        }
        check_props("fifo", r, &[])?;
        by_group.entry(g).or_default().push(r.body.as_str());
    }
    for g in GROUPS {
        let want: Vec<String> = (0..5).map(|i| format!("{g}:{i}")).collect();
        let have = by_group.get(g).cloned().unwrap_or_default();
        println!("ORDER fifo group={g} got={have:?}");
        if have != want {
            return Err(format!("fifo: group {g} out of order: {have:?}"));
        }
    }
    same_messages("fifo", &sent, &got)
}

/// `delay`: three messages due 3..4 s after sending (the SDK sends whole
/// seconds); none arrives before its time nor more than 8 s after, and
/// each carries its delivery time.
pub async fn delay(target: &Target) -> Outcome {
    with_clients!(target, "rs-delay", "rg-delay", None, delay_body)
}

async fn delay_body(p: &Producer, c: &SimpleConsumer) -> Outcome {
    const T: &str = "rs-delay";
    let due_s = now_ms() / 1000 + 4;
    let mut sent = HashMap::new();
    for i in 0..3 {
        let body = format!("delay-{i}");
        let m = MessageBuilder::delay_message_builder(T, body.clone().into_bytes(), due_s)
            .set_tag("d")
            .set_properties(HashMap::from([("index", i.to_string())]));
        let id = send("delay", p, build(m)?, &body).await?;
        sent.insert(id, body);
    }
    println!("DUE delay at {} ms (now {} ms)", due_s * 1000, now_ms());
    let got = receive_exactly("delay", c, T, 3, Duration::from_secs(60), 1).await?;
    for r in &got {
        println!(
            "TIMING delay body={} due_ms={} received_ms={} late_ms={}",
            r.body,
            due_s * 1000,
            r.at_ms,
            r.at_ms - due_s * 1000
        );
        // Exactly the user property sent: none of the broker's own (a timer
        // message's copy carries the broker's bookkeeping properties).
        let i = r.body.trim_start_matches("delay-");
        check_props("delay", r, &[("index", i)])?;
        if r.due != Some(due_s) {
            return Err(format!(
                "delay: {} came back due {:?}, sent due {due_s}",
                r.body, r.due
            ));
        }
        // The broker's timer works in ticks: allow it a little.
        if r.at_ms < due_s * 1000 - 200 {
            return Err(format!(
                "delay: {} received before its delivery time",
                r.body
            ));
        }
        // Nor long after (a loaded machine may delay the broker's timer).
        if r.at_ms > due_s * 1000 + 8000 {
            return Err(format!(
                "delay: {} received over 8 s after its delivery time",
                r.body
            ));
        }
    }
    same_messages("delay", &sent, &got)
}

/// The bodies the broker's transaction check-backs asked about, in order.
static CHECKED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// The transaction checker: commits check-commit-*, answers UNKNOWN the
/// first time it sees check-unknown-* and commits it after, and rolls back
/// anything else.
fn resolve(transaction_id: String, m: MessageView) -> TransactionResolution {
    let body = String::from_utf8_lossy(m.body()).into_owned();
    let seen = {
        let mut checked = CHECKED.lock().unwrap_or_else(|e| e.into_inner());
        let seen = checked.iter().filter(|b| **b == body).count();
        checked.push(body.clone());
        seen
    };
    println!(
        "CHECK transaction id={} transaction={transaction_id} body={body} (check {})",
        m.message_id(),
        seen + 1
    );
    if body.starts_with("check-commit") {
        TransactionResolution::COMMIT
    } else if body.starts_with("check-unknown") && seen == 0 {
        TransactionResolution::UNKNOWN
    } else if body.starts_with("check-unknown") {
        TransactionResolution::COMMIT
    } else {
        TransactionResolution::ROLLBACK
    }
}

/// `transaction`: one half message committed, one rolled back, and three
/// left open for the broker's check-back (the checker commits one, rolls
/// back one, and answers UNKNOWN for the third before committing it on
/// the next check): exactly the three committed ones arrive, and only the
/// open ones are checked.
pub async fn transaction(target: &Target) -> Outcome {
    with_clients!(
        target,
        "rs-transaction",
        "rg-transaction",
        Some(Box::new(resolve)),
        transaction_body
    )
}

async fn send_half(p: &Producer, body: &str) -> Result<impl Transaction, String> {
    let m = MessageBuilder::transaction_message_builder("rs-transaction", body.as_bytes().to_vec())
        .set_tag("tx");
    let tx = p
        .send_transaction_message(build(m)?)
        .await
        .map_err(|e| format!("transaction: send {body}: {e}"))?;
    println!(
        "SENT transaction id={} body={body} (half, transaction {})",
        tx.message_id(),
        tx.transaction_id()
    );
    Ok(tx)
}

async fn transaction_body(p: &Producer, c: &SimpleConsumer) -> Outcome {
    let mut sent = HashMap::new();
    let commit = send_half(p, "commit-1").await?;
    sent.insert(commit.message_id().to_string(), "commit-1".to_string());
    commit
        .commit()
        .await
        .map_err(|e| format!("transaction: commit: {e}"))?;
    println!("ENDED transaction commit-1 committed");
    let rollback = send_half(p, "rollback-1").await?;
    rollback
        .rollback()
        .await
        .map_err(|e| format!("transaction: rollback: {e}"))?;
    println!("ENDED transaction rollback-1 rolled back");
    for body in ["check-commit-1", "check-rollback-1", "check-unknown-1"] {
        let open = send_half(p, body).await?;
        if body != "check-rollback-1" {
            sent.insert(open.message_id().to_string(), body.to_string());
        }
    }
    let got = receive_exactly(
        "transaction",
        c,
        "rs-transaction",
        3,
        Duration::from_secs(90),
        1,
    )
    .await?;
    same_messages("transaction", &sent, &got)?;
    for r in &got {
        check_props("transaction", r, &[])?;
    }
    let checked = CHECKED.lock().unwrap_or_else(|e| e.into_inner()).clone();
    println!("COUNT transaction checked={checked:?}");
    let times = |b: &str| checked.iter().filter(|c| *c == b).count();
    if times("check-commit-1") == 0 || times("check-rollback-1") == 0 {
        return Err(format!(
            "transaction: the broker checked {checked:?}, not every open one"
        ));
    }
    if times("check-unknown-1") < 2 {
        return Err(format!(
            "transaction: check-unknown-1 checked {} times, not again after UNKNOWN",
            times("check-unknown-1")
        ));
    }
    if times("commit-1") > 0 || times("rollback-1") > 0 {
        return Err(format!(
            "transaction: the broker checked an ended transaction: {checked:?}"
        ));
    }
    Ok(())
}

/// `invisible`: a message not acked comes back after its 10 s invisible
/// time with delivery attempt 2, and not again once acked.
pub async fn invisible(target: &Target) -> Outcome {
    with_clients!(target, "rs-invisible", "rg-invisible", None, invisible_body)
}

async fn invisible_body(p: &Producer, c: &SimpleConsumer) -> Outcome {
    const T: &str = "rs-invisible";
    const INVISIBLE: Duration = Duration::from_secs(10);
    let m = MessageBuilder::builder()
        .set_topic(T)
        .set_body(b"invisible-1".to_vec())
        .set_tag("i")
        .set_keys(vec!["k"]);
    let id = send("invisible", p, build(m)?, "invisible-1").await?;
    let first = receive_one(c, T, INVISIBLE, Duration::from_secs(40))
        .await
        .map_err(|e| format!("invisible: first receive: {e}"))?;
    let at = Instant::now();
    let r = describe(&first);
    println!(
        "RECV invisible id={} body={} attempt={} (not acked)",
        r.id, r.body, r.attempt
    );
    check_same("invisible", &id, "invisible-1", &r, 1)?;
    let again = receive_one(c, T, INVISIBLE, Duration::from_secs(60))
        .await
        .map_err(|e| format!("invisible: second receive: {e}"))?;
    let after = at.elapsed();
    let r2 = describe(&again);
    println!(
        "RECV invisible id={} body={} attempt={} after {} ms",
        r2.id,
        r2.body,
        r2.attempt,
        after.as_millis()
    );
    check_same("invisible", &id, "invisible-1", &r2, 2)?;
    // The copy that came back has the tag, key and (no) properties sent.
    if r2.tag != "i" || r2.keys != ["k"] {
        return Err(format!(
            "invisible: came back with tag {:?}, keys {:?}",
            r2.tag, r2.keys
        ));
    }
    check_props("invisible", &r2, &[])?;
    if after < Duration::from_secs(8) {
        return Err(format!(
            "invisible: back after {after:?}, before its 10 s invisible time"
        ));
    }
    ack("invisible", c, &again).await?;
    println!("ACKED invisible id={}", r2.id);
    // One whole long poll (30 s), longer than the invisible time: an ack
    // that did not take would bring the message back within it.
    receive_exactly("invisible-after-ack", c, T, 0, Duration::ZERO, 1).await?;
    Ok(())
}

/// Fails unless `r` came with exactly the user properties `want`.
fn check_props(label: &str, r: &Received, want: &[(&str, &str)]) -> Outcome {
    let want: BTreeMap<String, String> = want
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    if r.props != want {
        return Err(format!(
            "{label}: {} came with user properties {:?}, sent with {want:?}",
            r.body, r.props
        ));
    }
    Ok(())
}

/// Fails unless `r` is the message `id` with `body`, at delivery `attempt`.
fn check_same(label: &str, id: &str, body: &str, r: &Received, attempt: i32) -> Outcome {
    if r.id != id || r.body != body {
        return Err(format!(
            "{label}: {} ({}) came, not {id} ({body})",
            r.id, r.body
        ));
    }
    if r.attempt != attempt {
        return Err(format!(
            "{label}: delivery attempt {}, expected {attempt}",
            r.attempt
        ));
    }
    Ok(())
}
