//! The dashboard's write actions (only with `dashboardAdminEnable=true`):
//! create a topic, create a subscription group, reset a group's offsets
//! to a time. Each becomes the admin request `basalt admin` would send and
//! goes through the same handler.

use basalt_remoting::RemotingCommand;
use basalt_remoting::code::{request, response};

use crate::http_serve::HttpRequest;

/// The admin request a dashboard action stands for, or why it is refused.
pub fn request_for(action: &str, r: &HttpRequest) -> Result<RemotingCommand, String> {
    let need = |k: &str| {
        r.param(k)
            .filter(|v| !v.is_empty())
            .map(str::to_string)
            .ok_or_else(|| format!("missing parameter {k}"))
    };
    match action {
        "topic" => {
            let topic = need("topic")?;
            let queues: i32 = r
                .param("queues")
                .unwrap_or("8")
                .parse()
                .map_err(|_| "queues must be a number".to_string())?;
            let mut cmd = RemotingCommand::request(request::UPDATE_AND_CREATE_TOPIC);
            cmd.ext_fields.insert("topic", &topic);
            cmd.ext_fields.insert("defaultTopic", "TBW102");
            cmd.ext_fields.insert("readQueueNums", queues.to_string());
            cmd.ext_fields.insert("writeQueueNums", queues.to_string());
            cmd.ext_fields.insert("perm", "6");
            cmd.ext_fields.insert("topicFilterType", "SINGLE_TAG");
            Ok(cmd)
        }
        "group" => {
            let group = need("group")?;
            let body = serde_json::json!({ "groupName": group });
            Ok(
                RemotingCommand::request(request::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
                    .with_body(body.to_string().into_bytes()),
            )
        }
        "reset-offset" => {
            let (topic, group) = (need("topic")?, need("group")?);
            let ts: i64 = need("timestamp")?.parse().map_err(|_| {
                "timestamp must be ms since the epoch, or -1 for the end".to_string()
            })?;
            let mut cmd = RemotingCommand::request(request::INVOKE_BROKER_TO_RESET_OFFSET);
            cmd.ext_fields.insert("topic", &topic);
            cmd.ext_fields.insert("group", &group);
            cmd.ext_fields.insert("timestamp", ts.to_string());
            cmd.ext_fields.insert("isForce", "true");
            Ok(cmd)
        }
        other => Err(format!("unknown action {other}")),
    }
}

/// The outcome text of an admin response.
pub fn outcome(resp: &RemotingCommand) -> Result<String, String> {
    let remark = resp.remark.clone().unwrap_or_default();
    if resp.code == response::SUCCESS {
        Ok(if remark.is_empty() {
            "done".into()
        } else {
            remark
        })
    } else {
        Err(format!("code {}: {remark}", resp.code))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::Method;

    fn req(q: &[(&str, &str)]) -> HttpRequest {
        HttpRequest {
            method: Method::POST,
            path: String::new(),
            query: q
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            same_origin_script: true,
            authorization: None,
            remote: None,
        }
    }

    #[test]
    fn actions_become_admin_requests_or_are_refused() {
        let t = request_for("topic", &req(&[("topic", "T"), ("queues", "3")])).unwrap();
        assert_eq!(t.code, request::UPDATE_AND_CREATE_TOPIC);
        assert_eq!(t.ext_fields.get("writeQueueNums"), Some("3"));
        let g = request_for("group", &req(&[("group", "G")])).unwrap();
        assert_eq!(g.code, request::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP);
        assert!(request_for("topic", &req(&[])).is_err());
        assert!(request_for("topic", &req(&[("topic", "T"), ("queues", "x")])).is_err());
        let r = &[("topic", "T"), ("group", "G"), ("timestamp", "soon")];
        assert!(request_for("reset-offset", &req(r)).is_err());
        assert!(request_for("delete-everything", &req(&[])).is_err());
    }
}
