//! GET_BROKER_CONFIG (26) and UPDATE_BROKER_CONFIG (25): the broker's
//! settings as `broker.conf` text, and the few an operator may change at
//! run time (docs/protocol.md#broker-settings).

use basalt_common::constants::{perm, topic as reserved};
use basalt_common::time::now_millis;
use basalt_remoting::RemotingCommand;
use basalt_remoting::code::response;
use basalt_remoting::protocol::DataVersion;

use super::error;
use super::paths::AdminPath;
use crate::live_config::LiveConfigError;
use crate::metadata::formats::TopicSettings;

/// Largest UPDATE_BROKER_CONFIG body accepted.
const MAX_UPDATE_BODY: usize = 64 * 1024;
/// Most keys one update may set.
const MAX_UPDATE_KEYS: usize = 64;

/// GET_BROKER_CONFIG: every setting as it is now (live values included),
/// Java `.properties` text in the body; the `version` ext field is the
/// settings' data version (its counter counts accepted updates).
pub fn broker_config(a: &AdminPath) -> RemotingCommand {
    let text = a.live.current(&a.config).properties_text();
    let version = DataVersion {
        counter: a.live.version() as i64,
        state_version: 0,
        timestamp: started_at_ms(a),
    };
    let mut resp = RemotingCommand::response(response::SUCCESS, None).with_body(text.into_bytes());
    resp.ext_fields.insert(
        "version",
        serde_json::to_string(&version).unwrap_or_default(),
    );
    resp
}

/// UPDATE_BROKER_CONFIG: the body is `key=value` lines. Either every key
/// is a live one with a valid value and all of them apply, or nothing
/// does: a key fixed at start is refused with NO_PERMISSION naming it (as
/// Java refuses `configBlackList` keys), an unknown key or a bad value
/// with INVALID_PARAMETER. Changes last until the broker restarts.
pub async fn update_broker_config(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    if req.body.len() > MAX_UPDATE_BODY {
        return error(
            response::INVALID_PARAMETER,
            format!("the settings body is over {MAX_UPDATE_BODY} bytes"),
        );
    }
    let Ok(text) = std::str::from_utf8(&req.body) else {
        return error(
            response::INVALID_PARAMETER,
            "the settings body is not UTF-8",
        );
    };
    let pairs = crate::config::properties_pairs(text);
    if pairs.len() > MAX_UPDATE_KEYS {
        return error(
            response::INVALID_PARAMETER,
            format!("at most {MAX_UPDATE_KEYS} settings per update"),
        );
    }
    let changed = match a.live.update(&a.config, &pairs) {
        Ok(c) => c,
        Err(e @ LiveConfigError::NotLive { .. }) => {
            return error(response::NO_PERMISSION, e.to_string());
        }
        Err(e) => return error(response::INVALID_PARAMETER, e.to_string()),
    };
    tracing::info!(?changed, "broker settings changed at run time");
    if changed.iter().any(|k| k == "autoCreateTopicEnable")
        && a.live.auto_create_topic_enable()
        && let Err(remark) = ensure_auto_create_topic(a).await
    {
        return error(response::SYSTEM_ERROR, remark);
    }
    if changed.iter().any(|k| k == "brokerPermission") {
        // The NameServers learn the new permission now (Java registers
        // synchronously here), so routes change before the answer.
        let ticket = a.registrar.register_soon();
        a.registrar.registered(ticket).await;
    }
    RemotingCommand::response(response::SUCCESS, None)
}

/// Auto-creation switched on: clients route a new topic through
/// TBW102, which exists only if the broker started with auto-creation on.
async fn ensure_auto_create_topic(a: &AdminPath) -> Result<(), String> {
    if a.topics.contains(reserved::AUTO_CREATE_TOPIC) {
        return Ok(());
    }
    let mut t = TopicSettings::new(
        reserved::AUTO_CREATE_TOPIC,
        a.config.default_topic_queue_nums,
    );
    t.perm = perm::INHERIT | perm::READ | perm::WRITE;
    let change = a.topics.update(t).map_err(|e| e.to_string())?;
    a.registrar.publish_topic_change(&change).await
}

/// The time the broker started, as GET_BROKER_CONFIG's version timestamp.
pub(crate) fn started_at_ms(a: &AdminPath) -> i64 {
    now_millis() - a.started_at.elapsed().as_millis() as i64
}
