//! QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401): the broker
//! assigns a consumer its queues when the client asks it to (the Java 5.x
//! client with `setClientRebalance(false)`), and says per (topic, group)
//! whether to pull them or pop them, as RocketMQ's QueryAssignmentProcessor
//! does (docs/pop.md#server-side-assignment).

use std::collections::BTreeSet;

use basalt_common::constants::perm;
use basalt_remoting::RemotingCommand;
use basalt_remoting::code::response;
use serde::{Deserialize, Serialize};

use super::paths::ClientPath;
use super::{checks, error};
use crate::metadata::request_modes::{POP, PULL, RequestMode};

const RETRY_PREFIX: &str = basalt_common::constants::topic::RETRY_GROUP_PREFIX;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct QueryBody {
    topic: String,
    consumer_group: String,
    #[serde(default)]
    client_id: String,
    #[serde(default)]
    strategy_name: String,
    #[serde(default)]
    message_model: String,
}

/// A queue as Java's MessageQueue orders it: topic, broker, queue id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
struct Queue {
    topic: String,
    broker_name: String,
    queue_id: i32,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Assignment<'a> {
    message_queue: &'a Queue,
    mode: &'a str,
    attachments: serde_json::Map<String, serde_json::Value>,
}

fn ok() -> RemotingCommand {
    RemotingCommand::response(response::SUCCESS, None)
}

/// QUERY_ASSIGNMENT: the queues `clientId` should read and how.
pub async fn query_assignment(c: &ClientPath, req: &RemotingCommand) -> RemotingCommand {
    let b: QueryBody = match basalt_remoting::fastjson::from_slice(&req.body) {
        Ok(b) => b,
        Err(e) => {
            return error(
                response::INVALID_PARAMETER,
                format!("bad assignment query: {e}"),
            );
        }
    };
    if let Err(resp) = checks::group(&b.consumer_group) {
        return resp;
    }
    if let Err(e) = basalt_common::topic::validate_topic(&b.topic) {
        return error(response::INVALID_PARAMETER, e.to_string());
    }
    let mode = mode_of(c, &b.topic, &b.consumer_group);
    let assigned = match all_queues(c, &b.topic).await {
        None => None,
        Some(all) if b.message_model == "BROADCASTING" => Some(all),
        Some(all) => {
            let ids = c
                .clients
                .consumer_group(&b.consumer_group)
                .map(|g| g.client_ids())
                .unwrap_or_default();
            clustering(&b, &mode, all, ids)
        }
    };
    let body = match assigned {
        None => serde_json::json!({}),
        Some(queues) => {
            let list: Vec<Assignment> = queues
                .iter()
                .map(|q| Assignment {
                    message_queue: q,
                    mode: &mode.mode,
                    attachments: Default::default(),
                })
                .collect();
            serde_json::json!({ "messageQueueAssignments": list })
        }
    };
    ok().with_body(body.to_string().into_bytes())
}

/// The mode set for the pair, else PULL (retry topics always pull), as
/// Java's default `defaultMessageRequestMode`.
fn mode_of(c: &ClientPath, topic: &str, group: &str) -> RequestMode {
    c.request_modes
        .get(topic, group)
        .filter(|_| !topic.starts_with(RETRY_PREFIX))
        .unwrap_or_else(|| RequestMode {
            topic: topic.to_string(),
            consumer_group: group.to_string(),
            mode: PULL.to_string(),
            pop_share_queue_num: 0,
        })
}

/// Every readable queue of the topic across its broker groups (the
/// NameServer's route), sorted; this broker's own when no NameServer
/// answers; None when the topic is unknown.
async fn all_queues(c: &ClientPath, topic: &str) -> Option<Vec<Queue>> {
    let mut out = BTreeSet::new();
    if let Some(route) = c.registrar.topic_route(topic).await {
        for q in route
            .queue_datas
            .iter()
            .filter(|q| q.perm & perm::READ != 0)
        {
            for id in 0..q.read_queue_nums {
                out.insert(queue(topic, &q.broker_name, id));
            }
        }
    } else if let Some(tc) = c.topics.get(topic) {
        for id in 0..tc.read_queue_nums {
            out.insert(queue(topic, &c.config.broker_name, id));
        }
    }
    (!out.is_empty()).then(|| out.into_iter().collect())
}

fn queue(topic: &str, broker: &str, id: i32) -> Queue {
    Queue {
        topic: topic.to_string(),
        broker_name: broker.to_string(),
        queue_id: id,
    }
}

/// A clustering group's share: POP with no sharing gives every consumer
/// each broker's queue -1 (pop them all); otherwise the strategy's share,
/// and in POP also the shares of the next `popShareQueueNum` consumers.
fn clustering(
    b: &QueryBody,
    mode: &RequestMode,
    all: Vec<Queue>,
    mut ids: Vec<String>,
) -> Option<Vec<Queue>> {
    if ids.is_empty() {
        return None;
    }
    ids.sort();
    if mode.mode == POP && mode.pop_share_queue_num <= 0 {
        let brokers: BTreeSet<&str> = all.iter().map(|q| q.broker_name.as_str()).collect();
        return Some(
            brokers
                .into_iter()
                .map(|br| queue(&b.topic, br, -1))
                .collect(),
        );
    }
    let index = ids.iter().position(|id| *id == b.client_id)?;
    let by_circle = b.strategy_name == "AVG_BY_CIRCLE";
    let share = |i: usize| allocate(&all, ids.len(), i, by_circle);
    if mode.mode != POP {
        return Some(share(index));
    }
    if ids.len() > all.len() {
        // Make sure each consumer has a queue.
        return Some(vec![all[index % all.len()].clone()]);
    }
    let mut out: BTreeSet<Queue> = share(index).into_iter().collect();
    for k in 1..=mode.pop_share_queue_num as usize {
        out.extend(share((index + k) % ids.len()));
    }
    Some(out.into_iter().collect())
}

/// Java's AllocateMessageQueueAveragely (`AVG`) or ...ByCircle.
fn allocate(all: &[Queue], consumers: usize, index: usize, by_circle: bool) -> Vec<Queue> {
    if by_circle {
        return all
            .iter()
            .enumerate()
            .filter(|(i, _)| i % consumers == index)
            .map(|(_, q)| q.clone())
            .collect();
    }
    let n = all.len();
    let rem = n % consumers;
    let size = if n <= consumers {
        1
    } else if rem > 0 && index < rem {
        n / consumers + 1
    } else {
        n / consumers
    };
    let start = if rem > 0 && index < rem {
        index * size
    } else {
        index * size + rem
    };
    let range = size.min(n.saturating_sub(start));
    (0..range).map(|i| all[(start + i) % n].clone()).collect()
}

/// SET_MESSAGE_REQUEST_MODE: records the mode of a (topic, group), saved
/// before the answer; a retry topic is refused as in Java.
pub async fn set_message_request_mode(c: &ClientPath, req: &RemotingCommand) -> RemotingCommand {
    let mode: RequestMode = match basalt_remoting::fastjson::from_slice(&req.body) {
        Ok(m) => m,
        Err(e) => {
            return error(
                response::INVALID_PARAMETER,
                format!("bad request mode: {e}"),
            );
        }
    };
    if mode.topic.starts_with(RETRY_PREFIX) {
        return error(
            response::NO_PERMISSION,
            "retry topic is not allowed to set mode",
        );
    }
    if let Err(resp) = checks::group(&mode.consumer_group) {
        return resp;
    }
    if let Err(e) = basalt_common::topic::validate_topic(&mode.topic) {
        return error(response::INVALID_PARAMETER, e.to_string());
    }
    if mode.mode != PULL && mode.mode != POP {
        return error(
            response::INVALID_PARAMETER,
            format!("unknown mode {:?}", mode.mode),
        );
    }
    let table = std::sync::Arc::clone(&c.request_modes);
    match tokio::task::spawn_blocking(move || table.set(mode)).await {
        Ok(Ok(())) => ok(),
        Ok(Err(e)) => error(
            response::SYSTEM_ERROR,
            format!("cannot save the request mode: {e}"),
        ),
        Err(e) => error(
            response::SYSTEM_ERROR,
            format!("request mode task failed: {e}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(n: i32) -> Vec<Queue> {
        (0..n).map(|i| queue("T", "b", i)).collect()
    }

    fn ids(all: &[Queue]) -> Vec<i32> {
        all.iter().map(|q| q.queue_id).collect()
    }

    #[test]
    fn averagely_as_java_allocates() {
        // 8 queues over 3 consumers: 3, 3, 2.
        let q = queues(8);
        assert_eq!(ids(&allocate(&q, 3, 0, false)), vec![0, 1, 2]);
        assert_eq!(ids(&allocate(&q, 3, 1, false)), vec![3, 4, 5]);
        assert_eq!(ids(&allocate(&q, 3, 2, false)), vec![6, 7]);
        assert_eq!(ids(&allocate(&q, 3, 1, true)), vec![1, 4, 7]);
        // More consumers than queues: the last get nothing.
        assert_eq!(ids(&allocate(&queues(2), 3, 2, false)), Vec::<i32>::new());
    }

    #[test]
    fn pop_without_sharing_pops_every_broker() {
        let b = QueryBody {
            topic: "T".into(),
            consumer_group: "g".into(),
            client_id: "c1".into(),
            strategy_name: "AVG".into(),
            message_model: "CLUSTERING".into(),
        };
        let mut all = queues(4);
        all.push(queue("T", "b2", 0));
        let pop = RequestMode {
            topic: "T".into(),
            consumer_group: "g".into(),
            mode: POP.into(),
            pop_share_queue_num: 0,
        };
        let got = clustering(&b, &pop, all.clone(), vec!["c1".into(), "c2".into()]).unwrap();
        assert_eq!(got, vec![queue("T", "b", -1), queue("T", "b2", -1)]);
        let pull = RequestMode {
            mode: PULL.into(),
            ..pop
        };
        let got = clustering(&b, &pull, all, vec!["c2".into(), "c1".into()]).unwrap();
        assert_eq!(ids(&got), vec![0, 1, 2]);
        assert!(clustering(&b, &pull, queues(2), vec![]).is_none());
    }
}
