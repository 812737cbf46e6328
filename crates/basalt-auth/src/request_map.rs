//! What each request code touches and which actions it needs, as the Java
//! 5.3 broker's `DefaultAuthorizationContextBuilder` and the
//! `@RocketMQAction`/`@RocketMQResource` annotations map them. Codes Java
//! leaves unchecked are mapped here too (docs/auth.md lists them).

use basalt_remoting::RemotingCommand;
use basalt_remoting::code::request as rq;
use basalt_remoting::protocol::HeartbeatData;

use crate::AuthError;
use crate::model::{Action, Resource, ResourceType};

/// The auth admin codes (Java `RequestCode.AUTH_*`).
pub mod auth_codes {
    pub const CREATE_USER: i32 = 3001;
    pub const UPDATE_USER: i32 = 3002;
    pub const DELETE_USER: i32 = 3003;
    pub const GET_USER: i32 = 3004;
    pub const LIST_USER: i32 = 3005;
    pub const CREATE_ACL: i32 = 3006;
    pub const UPDATE_ACL: i32 = 3007;
    pub const DELETE_ACL: i32 = 3008;
    pub const GET_ACL: i32 = 3009;
    pub const LIST_ACL: i32 = 3010;
}

/// One thing a request needs: any one of `actions` on `resource`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Need {
    pub resource: Resource,
    pub actions: Vec<Action>,
}

const RETRY: &str = "%RETRY%";
const DLQ: &str = "%DLQ%";

fn is_retry(topic: &str) -> bool {
    topic.starts_with(RETRY)
}

/// A group resource; a retry or DLQ topic names its group.
fn group(name: &str) -> Resource {
    let name = name
        .strip_prefix(RETRY)
        .or_else(|| name.strip_prefix(DLQ))
        .unwrap_or(name);
    Resource::of(ResourceType::Group, name)
}

fn topic(name: &str) -> Resource {
    if is_retry(name) || name.starts_with(DLQ) {
        return group(name);
    }
    Resource::of(ResourceType::Topic, name)
}

struct Needs<'a> {
    req: &'a RemotingCommand,
    out: Vec<Need>,
}

impl Needs<'_> {
    fn field(&self, key: &str) -> Option<&str> {
        self.req.ext_fields.get(key).filter(|v| !v.is_empty())
    }
    fn add(&mut self, resource: Resource, actions: &[Action]) {
        self.out.push(Need {
            resource,
            actions: actions.to_vec(),
        });
    }
    /// The named field as a resource of `kind`; a missing field is an error.
    fn need(&mut self, key: &str, kind: ResourceType, actions: &[Action]) -> Result<(), AuthError> {
        let v = self
            .field(key)
            .ok_or_else(|| AuthError::Invalid(format!("the request has no {key}")))?
            .to_string();
        let r = match kind {
            ResourceType::Group => group(&v),
            _ => topic(&v),
        };
        self.add(r, actions);
        Ok(())
    }
    fn opt(&mut self, key: &str, kind: ResourceType, actions: &[Action]) -> Result<(), AuthError> {
        if self.field(key).is_some() {
            self.need(key, kind, actions)?;
        }
        Ok(())
    }
    /// A send: the topic's Pub, or for a retry topic the group's Sub.
    fn send(&mut self, topic_key: &str, group_key: &str) -> Result<(), AuthError> {
        match self.field(topic_key) {
            Some(t) if is_retry(t) => self.need(group_key, ResourceType::Group, &[Action::Sub]),
            _ => self.need(topic_key, ResourceType::Topic, &[Action::Pub]),
        }
    }
    /// A topic (skipped when it is a retry topic) and a group, same actions.
    fn topic_and_group(&mut self, t: &str, g: &str, actions: &[Action]) -> Result<(), AuthError> {
        if !self.field(t).is_some_and(is_retry) {
            self.need(t, ResourceType::Topic, actions)?;
        }
        self.need(g, ResourceType::Group, actions)
    }
    fn body<T: serde::de::DeserializeOwned>(&self) -> Result<T, AuthError> {
        basalt_remoting::fastjson::from_slice(&self.req.body)
            .map_err(|e| AuthError::Invalid(format!("unreadable request body: {e}")))
    }
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct GroupBody {
    #[serde(default, alias = "consumerGroup", alias = "group")]
    group_name: String,
}

/// The resources of a QUERY_ASSIGNMENT or SET_MESSAGE_REQUEST_MODE body.
#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct AssignmentBody {
    #[serde(default)]
    topic: String,
    #[serde(default)]
    consumer_group: String,
}

/// The resources of a BATCH_ACK_MESSAGE body (BatchAckMessageRequestBody).
#[derive(serde::Deserialize, Default)]
struct BatchAckBody {
    #[serde(default)]
    acks: Vec<BatchAckTarget>,
}

#[derive(serde::Deserialize, Default)]
struct BatchAckTarget {
    #[serde(default, rename = "c", alias = "consumerGroup")]
    group: String,
    #[serde(default, rename = "t", alias = "topic")]
    topic: String,
}

/// What `req` needs, on a broker of cluster `cluster`. An empty list means
/// an authenticated user may send it.
pub fn needs(req: &RemotingCommand, cluster: &str) -> Result<Vec<Need>, AuthError> {
    use Action::*;
    use ResourceType::{Group, Topic};
    let mut n = Needs {
        req,
        out: Vec::new(),
    };
    let cluster_res = Resource::of(ResourceType::Cluster, cluster);
    match req.code {
        rq::GET_ROUTEINFO_BY_TOPIC => n.need("topic", Topic, &[Pub, Sub, Get])?,
        rq::SEND_MESSAGE | rq::SEND_REPLY_MESSAGE => n.send("topic", "group")?,
        rq::SEND_MESSAGE_V2 | rq::SEND_BATCH_MESSAGE | rq::SEND_REPLY_MESSAGE_V2 => {
            n.send("b", "a")?
        }
        rq::END_TRANSACTION => n.opt("topic", Topic, &[Pub])?,
        rq::CONSUMER_SEND_MSG_BACK => n.need("group", Group, &[Sub])?,
        rq::PULL_MESSAGE | rq::LITE_PULL_MESSAGE => {
            n.topic_and_group("topic", "consumerGroup", &[Sub])?
        }
        rq::QUERY_MESSAGE => n.need("topic", Topic, &[Sub, Get])?,
        // The POP codes' headers carry topic and group as SUB resources
        // (RocketMQ's @RocketMQResource annotations on them).
        rq::POP_MESSAGE
        | rq::ACK_MESSAGE
        | rq::CHANGE_MESSAGE_INVISIBLETIME
        | rq::NOTIFICATION
        | rq::POLLING_INFO => n.topic_and_group("topic", "consumerGroup", &[Sub])?,
        // Java checks nothing for a batch ack (its body has no annotated
        // header); Basalt asks SUB on each group and topic it acks in.
        rq::BATCH_ACK_MESSAGE => {
            let b: BatchAckBody = n.body()?;
            for a in &b.acks {
                n.add(group(&a.group), &[Sub]);
                if !is_retry(&a.topic) {
                    n.add(topic(&a.topic), &[Sub]);
                }
            }
        }
        // Bodies, not annotated headers: Java checks nothing; Basalt asks
        // Sub to be assigned a group's queues, Update to set their mode.
        rq::QUERY_ASSIGNMENT => {
            let b: AssignmentBody = n.body()?;
            n.add(group(&b.consumer_group), &[Sub]);
            if !is_retry(&b.topic) {
                n.add(topic(&b.topic), &[Sub]);
            }
        }
        rq::SET_MESSAGE_REQUEST_MODE => {
            let b: AssignmentBody = n.body()?;
            n.add(group(&b.consumer_group), &[Update]);
        }
        rq::HEART_BEAT => {
            let hb: HeartbeatData = n.body()?;
            for c in &hb.consumer_data_set {
                n.add(group(&c.group_name), &[Sub]);
                for s in c
                    .subscription_data_set
                    .iter()
                    .filter(|s| !is_retry(&s.topic))
                {
                    n.add(topic(&s.topic), &[Sub]);
                }
            }
        }
        rq::UNREGISTER_CLIENT => n.opt("consumerGroup", Group, &[Pub, Sub])?,
        rq::GET_CONSUMER_LIST_BY_GROUP => n.need("consumerGroup", Group, &[Sub, Get])?,
        rq::QUERY_CONSUMER_OFFSET => n.topic_and_group("topic", "consumerGroup", &[Sub, Get])?,
        rq::UPDATE_CONSUMER_OFFSET => {
            n.topic_and_group("topic", "consumerGroup", &[Sub, Update])?
        }
        rq::CHECK_CLIENT_CONFIG => {
            let b: GroupBody = n.body()?;
            n.add(group(&b.group_name), &[Sub]);
        }
        rq::LOCK_BATCH_MQ | rq::UNLOCK_BATCH_MQ => {
            let b: GroupBody = n.body()?;
            n.add(group(&b.group_name), &[Sub]);
        }
        rq::GET_MAX_OFFSET
        | rq::GET_MIN_OFFSET
        | rq::GET_EARLIEST_MSG_STORETIME
        | rq::SEARCH_OFFSET_BY_TIMESTAMP
        | rq::GET_TOPIC_CONFIG
        | rq::GET_TOPIC_STATS_INFO
        | rq::QUERY_TOPIC_CONSUME_BY_WHO => n.need("topic", Topic, &[Get])?,
        rq::VIEW_MESSAGE_BY_ID => match n.field("topic") {
            Some(_) => n.need("topic", Topic, &[Get])?,
            None => n.add(cluster_res, &[Get]),
        },
        rq::UPDATE_AND_CREATE_TOPIC => n.need("topic", Topic, &[Create])?,
        rq::DELETE_TOPIC_IN_BROKER => n.need("topic", Topic, &[Delete])?,
        rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => {
            let b: GroupBody = n.body()?;
            if b.group_name.is_empty() {
                return Err(AuthError::Invalid(
                    "the group config has no groupName".into(),
                ));
            }
            n.add(group(&b.group_name), &[Create]);
        }
        rq::DELETE_SUBSCRIPTIONGROUP => n.need("groupName", Group, &[Delete])?,
        rq::GET_SUBSCRIPTIONGROUP_CONFIG => n.need("group", Group, &[Get])?,
        rq::GET_CONSUME_STATS => {
            n.need("consumerGroup", Group, &[Get])?;
            n.opt("topic", Topic, &[Get])?;
        }
        rq::GET_CONSUMER_CONNECTION_LIST | rq::GET_CONSUMER_RUNNING_INFO => {
            n.need("consumerGroup", Group, &[Get])?
        }
        rq::INVOKE_BROKER_TO_RESET_OFFSET => {
            n.need("group", Group, &[Update])?;
            n.need("topic", Topic, &[Update])?;
        }
        rq::CLONE_GROUP_OFFSET => {
            n.need("destGroup", Group, &[Update])?;
            n.need("srcGroup", Group, &[Get])?;
            n.opt("topic", Topic, &[Update])?;
        }
        rq::QUERY_CONSUME_QUEUE => {
            n.need("topic", Topic, &[Get])?;
            n.opt("consumerGroup", Group, &[Get])?;
        }
        // Cluster-wide writes: broker settings, the NameServer's tables,
        // users and ACLs.
        rq::UPDATE_BROKER_CONFIG
        | rq::CLEAN_EXPIRED_CONSUMEQUEUE
        | rq::LEDGER_TRANSFER
        | rq::REGISTER_BROKER
        | rq::UNREGISTER_BROKER
        | rq::DELETE_TOPIC_IN_NAMESRV
        | rq::REGISTER_TOPIC_IN_NAMESRV
        | rq::WIPE_WRITE_PERM_OF_BROKER
        | rq::ADD_WRITE_PERM_OF_BROKER
        | rq::PUT_KV_CONFIG
        | rq::DELETE_KV_CONFIG
        | auth_codes::CREATE_USER
        | auth_codes::UPDATE_USER
        | auth_codes::DELETE_USER
        | auth_codes::CREATE_ACL
        | auth_codes::UPDATE_ACL
        | auth_codes::DELETE_ACL => n.add(cluster_res, &[Update]),
        // Everything else Basalt serves reads broker-wide state (runtime
        // info, all configs and offsets, users, ACLs): the cluster's Get.
        _ => n.add(cluster_res, &[Get]),
    }
    Ok(n.out)
}

/// Whether `code` changes the NameServer's tables (a super user's job when
/// authentication is on).
pub fn is_namesrv_write(code: i32) -> bool {
    matches!(
        code,
        rq::REGISTER_BROKER
            | rq::UNREGISTER_BROKER
            | rq::DELETE_TOPIC_IN_NAMESRV
            | rq::REGISTER_TOPIC_IN_NAMESRV
            | rq::WIPE_WRITE_PERM_OF_BROKER
            | rq::ADD_WRITE_PERM_OF_BROKER
            | rq::PUT_KV_CONFIG
            | rq::DELETE_KV_CONFIG
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_remoting::ExtFields;

    fn req(code: i32, fields: &[(&str, &str)]) -> RemotingCommand {
        let mut ext = ExtFields::new();
        for (k, v) in fields {
            ext.insert(k, v);
        }
        RemotingCommand::request(code).with_ext(ext)
    }

    #[test]
    fn sends_need_pub_or_retry_group_sub() {
        let n = needs(&req(rq::SEND_MESSAGE_V2, &[("a", "pg"), ("b", "T")]), "c").unwrap();
        assert_eq!(n[0].resource.key(), "Topic:T");
        assert_eq!(n[0].actions, vec![Action::Pub]);
        let n = needs(
            &req(rq::SEND_MESSAGE_V2, &[("a", "g"), ("b", "%RETRY%g")]),
            "c",
        )
        .unwrap();
        assert_eq!(n[0].resource.key(), "Group:g");
        assert_eq!(n[0].actions, vec![Action::Sub]);
    }

    #[test]
    fn pull_needs_topic_and_group() {
        let n = needs(
            &req(rq::PULL_MESSAGE, &[("topic", "T"), ("consumerGroup", "g")]),
            "c",
        )
        .unwrap();
        let keys: Vec<String> = n.iter().map(|n| n.resource.key()).collect();
        assert_eq!(keys, vec!["Topic:T", "Group:g"]);
    }

    #[test]
    fn pop_codes_need_topic_and_group_sub() {
        for code in [
            rq::POP_MESSAGE,
            rq::ACK_MESSAGE,
            rq::CHANGE_MESSAGE_INVISIBLETIME,
        ] {
            let n = needs(&req(code, &[("topic", "T"), ("consumerGroup", "g")]), "c").unwrap();
            let keys: Vec<String> = n.iter().map(|n| n.resource.key()).collect();
            assert_eq!(keys, vec!["Topic:T", "Group:g"], "code {code}");
            assert!(n.iter().all(|n| n.actions == vec![Action::Sub]));
        }
        let body = r#"{"brokerName":"b","acks":[{"c":"g1","t":"T1","b":"AQ=="},{"c":"g2","t":"%RETRY%g2_T1"}]}"#;
        let b = RemotingCommand::request(rq::BATCH_ACK_MESSAGE).with_body(body.as_bytes().to_vec());
        let keys: Vec<String> = needs(&b, "c")
            .unwrap()
            .iter()
            .map(|n| n.resource.key())
            .collect();
        assert_eq!(keys, vec!["Group:g1", "Topic:T1", "Group:g2"]);
        let bad = RemotingCommand::request(rq::BATCH_ACK_MESSAGE).with_body(b"{not json".to_vec());
        assert!(
            needs(&bad, "c").is_err(),
            "an unreadable batch ack is refused"
        );
    }

    #[test]
    fn admin_and_unknown_codes_need_the_cluster() {
        let n = needs(
            &req(auth_codes::CREATE_USER, &[("username", "x")]),
            "DefaultCluster",
        )
        .unwrap();
        assert_eq!(n[0].resource.key(), "Cluster:DefaultCluster");
        assert_eq!(n[0].actions, vec![Action::Update]);
        let n = needs(&req(rq::GET_BROKER_CONFIG, &[]), "c").unwrap();
        assert_eq!(n[0].actions, vec![Action::Get]);
    }

    #[test]
    fn missing_fields_are_errors() {
        assert!(needs(&req(rq::SEND_MESSAGE, &[]), "c").is_err());
        assert!(needs(&req(rq::HEART_BEAT, &[]).with_body(b"{".to_vec()), "c").is_err());
    }
}
