//! Model test: random puts, batches, restarts (clean and as after a crash)
//! and cleanups, checked against a simple model of which messages each queue
//! must return and at which queue offsets.

mod common;

use std::time::Duration;

use basalt_store::MessageStore;
use common::*;
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Put { queue: i32, size: usize },
    Batch { queue: i32, n: usize, size: usize },
    Restart { crashed: bool },
    Cleanup,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0..3i32, 10..3000usize).prop_map(|(queue, size)| Op::Put { queue, size }),
        3 => (0..3i32, 1..6usize, 10..1500usize).prop_map(|(queue, n, size)| Op::Batch { queue, n, size }),
        1 => any::<bool>().prop_map(|crashed| Op::Restart { crashed }),
        1 => Just(Op::Cleanup),
    ]
}

/// A message the model expects, with where it was written.
#[derive(Debug, Clone)]
struct Expected {
    queue_offset: i64,
    phys: i64,
    body: Vec<u8>,
}

fn restart(
    dir: &std::path::Path,
    store: std::sync::Arc<MessageStore>,
    crashed: bool,
) -> std::sync::Arc<MessageStore> {
    store.shutdown();
    drop(store);
    if crashed {
        // As after a crash: the abort marker is there and nothing of the
        // ConsumeQueues can be trusted past the checkpoint.
        std::fs::write(dir.join("abort"), b"1").unwrap();
    }
    open(dir)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, .. ProptestConfig::default() })]

    #[test]
    fn queues_match_the_model(ops in proptest::collection::vec(op(), 1..40)) {
        check_model(ops)?;
    }
}

/// A case proptest once found: a forced cleanup while dispatch was still
/// behind deleted files whose ConsumeQueue units were never written.
#[test]
fn forced_cleanup_after_rolls() {
    let ops = vec![
        Op::Put {
            queue: 0,
            size: 673,
        },
        Op::Put {
            queue: 0,
            size: 1419,
        },
        Op::Batch {
            queue: 0,
            n: 2,
            size: 492,
        },
        Op::Put {
            queue: 1,
            size: 1809,
        },
        Op::Batch {
            queue: 1,
            n: 1,
            size: 1286,
        },
        Op::Put {
            queue: 1,
            size: 2951,
        },
        Op::Put {
            queue: 1,
            size: 2474,
        },
        Op::Batch {
            queue: 2,
            n: 1,
            size: 213,
        },
        Op::Put {
            queue: 1,
            size: 2696,
        },
        Op::Put {
            queue: 2,
            size: 273,
        },
        Op::Batch {
            queue: 0,
            n: 4,
            size: 585,
        },
        Op::Batch {
            queue: 0,
            n: 2,
            size: 841,
        },
        Op::Batch {
            queue: 2,
            n: 5,
            size: 882,
        },
        Op::Put {
            queue: 2,
            size: 2528,
        },
        Op::Put {
            queue: 1,
            size: 2188,
        },
        Op::Batch {
            queue: 0,
            n: 3,
            size: 869,
        },
        Op::Put {
            queue: 2,
            size: 2799,
        },
        Op::Put {
            queue: 1,
            size: 2460,
        },
        Op::Put {
            queue: 0,
            size: 1784,
        },
        Op::Batch {
            queue: 2,
            n: 5,
            size: 866,
        },
        Op::Put {
            queue: 2,
            size: 2205,
        },
        Op::Put {
            queue: 2,
            size: 704,
        },
        Op::Put {
            queue: 1,
            size: 1753,
        },
        Op::Put {
            queue: 0,
            size: 755,
        },
        Op::Batch {
            queue: 0,
            n: 1,
            size: 1140,
        },
        Op::Put {
            queue: 2,
            size: 2351,
        },
        Op::Batch {
            queue: 0,
            n: 1,
            size: 497,
        },
        Op::Batch {
            queue: 2,
            n: 5,
            size: 461,
        },
        Op::Batch {
            queue: 0,
            n: 2,
            size: 876,
        },
        Op::Put {
            queue: 2,
            size: 2961,
        },
        Op::Cleanup,
    ];
    check_model(ops).unwrap();
}

fn check_model(ops: Vec<Op>) -> Result<(), TestCaseError> {
    {
        let dir = tempfile::tempdir().unwrap();
        let mut store = open(dir.path());
        let mut model: Vec<Vec<Expected>> = vec![Vec::new(); 3];
        let mut next_body = 0usize;
        for op in ops {
            match op {
                Op::Put { queue, size } => {
                    let m = Msg::new("M", queue, body(next_body, size));
                    next_body += 1;
                    let a = store
                        .put_message(&m.draft(store.store_host()))
                        .append
                        .unwrap();
                    let q = &mut model[queue as usize];
                    prop_assert_eq!(
                        a.queue_offset,
                        q.last().map(|e| e.queue_offset + 1).unwrap_or(0)
                    );
                    q.push(Expected {
                        queue_offset: a.queue_offset,
                        phys: a.wrote_offset,
                        body: m.body,
                    });
                }
                Op::Batch { queue, n, size } => {
                    let msgs: Vec<Msg> = (0..n)
                        .map(|i| Msg::new("M", queue, body(next_body + i, size)))
                        .collect();
                    next_body += n;
                    let host = store.store_host();
                    let drafts: Vec<_> = msgs.iter().map(|m| m.draft(host)).collect();
                    let a = store.put_messages(&drafts).append.unwrap();
                    let q = &mut model[queue as usize];
                    let first = q.last().map(|e| e.queue_offset + 1).unwrap_or(0);
                    prop_assert_eq!(a.queue_offset, first);
                    for (i, m) in msgs.into_iter().enumerate() {
                        q.push(Expected {
                            queue_offset: first + i as i64,
                            phys: a.offsets()[i],
                            body: m.body,
                        });
                    }
                }
                Op::Restart { crashed } => {
                    store = restart(dir.path(), store, crashed);
                }
                Op::Cleanup => {
                    store.clean_now(true).unwrap();
                }
            }
        }
        prop_assert!(
            store.wait_dispatched(store.commit_log().max_offset(), Duration::from_secs(10))
        );
        let min_phys = store.commit_log().min_offset();
        for (qi, expected) in model.iter().enumerate() {
            let want: Vec<(i64, Vec<u8>)> = expected
                .iter()
                .filter(|e| e.phys >= min_phys)
                .map(|e| (e.queue_offset, e.body.clone()))
                .collect();
            let got = read_queue(&store, "M", qi as i32);
            prop_assert_eq!(got.len(), want.len(), "queue {}", qi);
            prop_assert_eq!(got, want);
            let next = expected.last().map(|e| e.queue_offset + 1).unwrap_or(0);
            prop_assert_eq!(store.max_offset_in_queue("M", qi as i32), next);
        }
        assert_consistent(&store);
    }
    Ok(())
}
