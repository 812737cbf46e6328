//! POP across a ledger fail-over (docs/pop.md): ten messages are popped
//! from the leader of a three-member ledger group with a 10 s invisible
//! time and the even ones acked; the leader is killed with SIGKILL while
//! the odd ones are invisible. The new leader rebuilds its in-flight table
//! from the replicated revive log: exactly the five odd messages come back
//! (delivery attempt raised), no acked one does, and nothing else follows.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use basalt_client::{Admin, ClientConfig};
use basalt_remoting::code::response;

use crate::pop::{Popped, ack, body, try_pop};
use crate::procs::ledger_group::LedgerGroup;
use crate::raw::{Raw, send_request};

const TOPIC: &str = "PopLedger";
const GROUP: &str = "GL";

/// Pops from `addr` until `n` messages came or `within` passed; a broker
/// not serving POP yet (SERVICE_NOT_AVAILABLE while it takes over) is
/// asked again.
fn pop_from(addr: &str, invisible_ms: i64, n: usize, within: Duration) -> Vec<Popped> {
    let deadline = Instant::now() + within;
    let mut c = Raw::connect(addr);
    let mut got = Vec::new();
    while got.len() < n && Instant::now() < deadline {
        match try_pop(&mut c, GROUP, TOPIC, invisible_ms, 2_000) {
            Ok(more) => got.extend(more),
            Err((code, remark)) => {
                assert_eq!(code, response::SERVICE_NOT_AVAILABLE, "pop: {remark:?}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
    got
}

#[test]
fn invisible_messages_come_back_from_the_new_leader() {
    let work = tempfile::tempdir().expect("temp dir");
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let mut group = LedgerGroup::start(work.path(), &[]);
    let admin = Admin::new(ClientConfig::new(&group.ns_addr));
    let leader = rt.block_on(group.master(&admin, None));
    rt.block_on(group.create_topic(&admin, &leader, TOPIC, 2));

    let mut c = Raw::connect(&leader);
    for i in 0..10 {
        let r = c.call(send_request(TOPIC, i % 2, format!("l{i}").as_bytes()));
        assert_eq!(r.code, response::SUCCESS, "send l{i}: {:?}", r.remark);
    }
    let first = pop_from(&leader, 10_000, 10, Duration::from_secs(20));
    assert_eq!(first.len(), 10, "all ten popped from the leader");
    let mut acked = BTreeSet::new();
    for p in &first {
        let b = body(p);
        let i: u32 = b[1..].parse().expect("body l<i>");
        if i.is_multiple_of(2) {
            let r = ack(&mut c, GROUP, TOPIC, p);
            assert_eq!(r.code, response::SUCCESS, "ack {b}: {:?}", r.remark);
            acked.insert(b);
        }
    }
    assert_eq!(acked.len(), 5);

    group.kill9(&leader);
    let next = rt.block_on(group.master(&admin, Some(&leader)));
    println!("leader {leader} killed; new leader {next}");
    let back = pop_from(&next, 60_000, 5, Duration::from_secs(60));
    let bodies: BTreeSet<String> = back.iter().map(body).collect();
    println!("came back from {next}: {bodies:?}");
    let odd: BTreeSet<String> = (0..10)
        .filter(|i| i % 2 == 1)
        .map(|i| format!("l{i}"))
        .collect();
    assert_eq!(bodies, odd, "exactly the unacked messages come back");
    assert_eq!(back.len(), 5, "each once");
    assert!(
        back.iter().all(|p| p.msg.reconsume_times >= 1),
        "delivery attempt raised"
    );
    let mut n = Raw::connect(&next);
    for p in &back {
        assert_eq!(ack(&mut n, GROUP, TOPIC, p).code, response::SUCCESS);
    }
    let more = pop_from(&next, 60_000, 1, Duration::from_secs(12));
    assert!(
        more.is_empty(),
        "nothing more: {:?}",
        more.iter().map(body).collect::<Vec<_>>()
    );
}
