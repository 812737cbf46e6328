//! ACL 1.0: the 4.x `plain_acl.yml` accounts, evaluated with the 4.9
//! broker's own semantics (`PlainAccessValidator`, `PlainPermissionManager`,
//! `Permission`), reloaded when the files change.
//!
//! Surprises kept from Java: a global white address passes every request
//! unsigned; an account whose `whiteRemoteAddress` matches the caller skips
//! the signature *and* the permission checks; a Pub on the trace topic is
//! never refused; an unknown or missing permission string means DENY.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use basalt_remoting::RemotingCommand;
use basalt_remoting::code::request as rq;
use basalt_remoting::protocol::HeartbeatData;
use parking_lot::RwLock;
use yaml_rust2::{Yaml, YamlLoader};

use crate::AuthError;
use crate::ip::IpRule;

/// Permission bits (Java `Permission`).
pub const DENY: u8 = 1;
pub const ANY: u8 = 2;
pub const PUB: u8 = 4;
pub const SUB: u8 = 8;

const RETRY: &str = "%RETRY%";
const TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";

/// Java `Permission.parsePermFromString`.
pub fn parse_perm(s: &str) -> u8 {
    match s.trim() {
        "PUB" => PUB,
        "SUB" => SUB,
        "PUB|SUB" | "SUB|PUB" => PUB | SUB,
        _ => DENY,
    }
}

/// Java `Permission.checkPermission`.
pub fn check_perm(needed: u8, owned: u8) -> bool {
    if owned & DENY != 0 {
        return false;
    }
    if needed & ANY != 0 {
        return owned & (PUB | SUB) != 0;
    }
    needed & owned != 0
}

/// One account. Invariant: `perms` keys are topics or `%RETRY%group`.
#[derive(Clone)]
pub struct Account {
    pub access_key: String,
    secret_key: String,
    white: Option<IpRule>,
    pub admin: bool,
    default_topic_perm: u8,
    default_group_perm: u8,
    perms: HashMap<String, u8>,
}

impl std::fmt::Debug for Account {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Account")
            .field("access_key", &self.access_key)
            .field("admin", &self.admin)
            .finish()
    }
}

/// Every account and global white address of all plain ACL files.
#[derive(Debug, Default, Clone)]
pub struct PlainAclConfig {
    global_white: Vec<IpRule>,
    accounts: HashMap<String, Account>,
}

fn yaml_str(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Real(r) => Some(r.clone()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn yaml_list(y: &Yaml) -> Vec<String> {
    match y {
        Yaml::Array(a) => a.iter().filter_map(yaml_str).collect(),
        other => yaml_str(other).into_iter().collect(),
    }
}

fn parse_perms(
    list: &[String],
    group: bool,
    out: &mut HashMap<String, u8>,
) -> Result<(), AuthError> {
    for item in list {
        let (name, perm) = item
            .split_once('=')
            .filter(|(n, p)| !n.trim().is_empty() && !p.contains('='))
            .ok_or_else(|| AuthError::Invalid(format!("permission {item:?} is not Res=Perm")))?;
        let key = if group {
            format!("{RETRY}{}", name.trim())
        } else {
            name.trim().to_string()
        };
        out.insert(key, parse_perm(perm));
    }
    Ok(())
}

fn parse_account(y: &Yaml) -> Result<Account, AuthError> {
    let get = |k: &str| yaml_str(&y[k]);
    let access_key = get("accessKey").unwrap_or_default();
    let secret_key = get("secretKey").unwrap_or_default();
    if access_key.len() < 6 || secret_key.len() < 6 {
        return Err(AuthError::Invalid(format!(
            "account {access_key:?}: accessKey and secretKey must be at least 6 characters"
        )));
    }
    let white = match get("whiteRemoteAddress").filter(|s| !s.trim().is_empty()) {
        Some(w) => Some(IpRule::parse(&w)?),
        None => None,
    };
    let mut perms = HashMap::new();
    parse_perms(&yaml_list(&y["topicPerms"]), false, &mut perms)?;
    parse_perms(&yaml_list(&y["groupPerms"]), true, &mut perms)?;
    Ok(Account {
        admin: matches!(&y["admin"], Yaml::Boolean(true))
            || get("admin").is_some_and(|a| a.eq_ignore_ascii_case("true")),
        default_topic_perm: get("defaultTopicPerm").map_or(DENY, |p| parse_perm(&p)),
        default_group_perm: get("defaultGroupPerm").map_or(DENY, |p| parse_perm(&p)),
        access_key,
        secret_key,
        white,
        perms,
    })
}

impl PlainAclConfig {
    /// Adds one file's content.
    pub fn add_yaml(&mut self, text: &str, source: &str) -> Result<(), AuthError> {
        let docs = YamlLoader::load_from_str(text)
            .map_err(|e| AuthError::Invalid(format!("{source}: {e}")))?;
        let Some(doc) = docs.first() else {
            return Ok(());
        };
        for w in yaml_list(&doc["globalWhiteRemoteAddresses"]) {
            self.global_white.push(IpRule::parse(&w)?);
        }
        if let Yaml::Array(accounts) = &doc["accounts"] {
            for a in accounts {
                let acc =
                    parse_account(a).map_err(|e| AuthError::Invalid(format!("{source}: {e}")))?;
                if self.accounts.contains_key(&acc.access_key) {
                    return Err(AuthError::Invalid(format!(
                        "{source}: accessKey {} is defined twice",
                        acc.access_key
                    )));
                }
                self.accounts.insert(acc.access_key.clone(), acc);
            }
        }
        Ok(())
    }

    pub fn account(&self, access_key: &str) -> Option<&Account> {
        self.accounts.get(access_key)
    }
}

/// Whether an ACL 1.0 request code needs an admin account: Java's five
/// (topic and group create/delete, broker config) plus the cluster-wide
/// writes Java left open (docs/auth.md).
pub fn needs_admin(code: i32) -> bool {
    matches!(
        code,
        rq::UPDATE_AND_CREATE_TOPIC
            | rq::UPDATE_BROKER_CONFIG
            | rq::DELETE_TOPIC_IN_BROKER
            | rq::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
            | rq::DELETE_SUBSCRIPTIONGROUP
            | rq::INVOKE_BROKER_TO_RESET_OFFSET
            | rq::CLONE_GROUP_OFFSET
            | rq::CLEAN_EXPIRED_CONSUMEQUEUE
            | rq::LEDGER_TRANSFER
            | 3001..=3010
    ) || crate::request_map::is_namesrv_write(code)
}

/// The resources and permissions a request needs (Java
/// `PlainAccessValidator.parse`).
fn needed(req: &RemotingCommand) -> Result<Vec<(String, u8)>, AuthError> {
    let f = |k: &str| req.ext_fields.get(k).unwrap_or("").to_string();
    let retry = |g: String| format!("{RETRY}{g}");
    let mut out = Vec::new();
    match req.code {
        rq::SEND_MESSAGE | rq::SEND_REPLY_MESSAGE => match f("topic") {
            t if t.starts_with(RETRY) => out.push((retry(f("group")), SUB)),
            t => out.push((t, PUB)),
        },
        rq::SEND_MESSAGE_V2 | rq::SEND_BATCH_MESSAGE | rq::SEND_REPLY_MESSAGE_V2 => match f("b") {
            t if t.starts_with(RETRY) => out.push((retry(f("a")), SUB)),
            t => out.push((t, PUB)),
        },
        rq::CONSUMER_SEND_MSG_BACK => out.push((retry(f("group")), SUB)),
        rq::PULL_MESSAGE | rq::LITE_PULL_MESSAGE => {
            out.push((f("topic"), SUB));
            out.push((retry(f("consumerGroup")), SUB));
        }
        rq::QUERY_MESSAGE => out.push((f("topic"), SUB)),
        rq::HEART_BEAT => {
            let hb: HeartbeatData = basalt_remoting::fastjson::from_slice(&req.body)
                .map_err(|e| AuthError::Invalid(format!("unreadable heartbeat: {e}")))?;
            for c in hb.consumer_data_set {
                out.push((retry(c.group_name), SUB));
                for s in c.subscription_data_set {
                    out.push((s.topic, SUB));
                }
            }
        }
        rq::UNREGISTER_CLIENT | rq::GET_CONSUMER_LIST_BY_GROUP => {
            out.push((retry(f("consumerGroup")), SUB))
        }
        rq::UPDATE_CONSUMER_OFFSET | rq::QUERY_CONSUMER_OFFSET => {
            out.push((retry(f("consumerGroup")), SUB));
            out.push((f("topic"), SUB));
        }
        _ => {}
    }
    Ok(out)
}

fn print_res(r: &str) -> String {
    match r.strip_prefix(RETRY) {
        Some(g) => format!("group:{g}"),
        None => format!("topic:{r}"),
    }
}

/// Why ACL 1.0 refused, or Ok (Java `PlainPermissionManager.validate`).
pub fn validate(
    cfg: &PlainAclConfig,
    req: &RemotingCommand,
    ip: Option<IpAddr>,
) -> Result<(), String> {
    let matches = |r: &IpRule| ip.is_some_and(|ip| r.matches(ip));
    if cfg.global_white.iter().any(matches) {
        return Ok(());
    }
    let ak = req
        .ext_fields
        .get(crate::sign::ACCESS_KEY)
        .ok_or("No accessKey is configured")?;
    let acc = cfg
        .account(ak)
        .ok_or_else(|| format!("No acl config for {ak}"))?;
    if acc.white.as_ref().is_some_and(matches) {
        return Ok(());
    }
    if !crate::sign::verify(req, &acc.secret_key) {
        return Err(format!("Check signature failed for accessKey={ak}"));
    }
    let needs = needed(req).map_err(|e| e.to_string())?;
    if needs.iter().any(|(r, p)| r == TRACE_TOPIC && *p == PUB) {
        return Ok(());
    }
    if needs_admin(req.code) && !acc.admin {
        return Err(format!(
            "Need admin permission for request code={}, but accessKey={ak} is not",
            req.code
        ));
    }
    for (res, perm) in &needs {
        let owned = match acc.perms.get(res) {
            Some(p) => *p,
            None if res.starts_with(RETRY) => acc.default_group_perm,
            None => acc.default_topic_perm,
        };
        if !check_perm(*perm, owned) {
            return Err(format!("No default permission for {}", print_res(res)));
        }
    }
    Ok(())
}

/// A file's path, modification time and length (what a change is).
type Stamp = (PathBuf, Option<SystemTime>, u64);

/// The plain ACL files and their current parse; [`PlainAcl::reload_if_changed`]
/// re-reads them when one changed, keeping the old accounts when the new
/// content does not parse.
pub struct PlainAcl {
    files: Vec<PathBuf>,
    dir: Option<PathBuf>,
    current: RwLock<(Arc<PlainAclConfig>, Vec<Stamp>)>,
}

impl std::fmt::Debug for PlainAcl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PlainAcl")
            .field("files", &self.files)
            .finish()
    }
}

impl PlainAcl {
    /// Where Java looks under `home` (`conf/plain_acl.yml`, `conf/acl/*.yml`),
    /// plus `extra`.
    pub fn new(home: Option<&Path>, extra: Option<&Path>) -> PlainAcl {
        let mut files = Vec::new();
        if let Some(h) = home {
            files.push(h.join("conf").join("plain_acl.yml"));
        }
        files.extend(extra.map(Path::to_path_buf));
        let acl = PlainAcl {
            files,
            dir: home.map(|h| h.join("conf").join("acl")),
            current: RwLock::new((Arc::default(), Vec::new())),
        };
        acl.reload_if_changed();
        acl
    }

    /// The accounts now in force.
    pub fn config(&self) -> Arc<PlainAclConfig> {
        Arc::clone(&self.current.read().0)
    }

    fn stamps(&self) -> Vec<Stamp> {
        let mut paths = self.files.clone();
        if let Some(dir) = &self.dir
            && let Ok(rd) = std::fs::read_dir(dir)
        {
            let mut yml: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "yml" || x == "yaml"))
                .collect();
            yml.sort();
            paths.extend(yml);
        }
        paths
            .into_iter()
            .filter_map(|p| {
                let m = std::fs::metadata(&p).ok()?;
                Some((p, m.modified().ok(), m.len()))
            })
            .collect()
    }

    /// Re-reads the files if any was added, removed or changed (a stat per
    /// file when none did). Blocking: call off the async workers. Returns
    /// whether new accounts took effect.
    pub fn reload_if_changed(&self) -> bool {
        let stamps = self.stamps();
        if stamps == self.current.read().1 {
            return false;
        }
        let mut cfg = PlainAclConfig::default();
        for (p, _, _) in &stamps {
            let parsed = std::fs::read_to_string(p)
                .map_err(|e| AuthError::Invalid(e.to_string()))
                .and_then(|t| cfg.add_yaml(&t, &p.display().to_string()));
            if let Err(e) = parsed {
                tracing::error!(file = %p.display(), error = %e, "plain ACL file not loaded; the previous accounts stay in force");
                // Remember the stamps so a broken file is reported once.
                self.current.write().1 = stamps;
                return false;
            }
        }
        tracing::info!(
            files = stamps.len(),
            accounts = cfg.accounts.len(),
            "plain ACL loaded"
        );
        *self.current.write() = (Arc::new(cfg), stamps);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_remoting::ExtFields;

    const YML: &str = r#"
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"#;

    fn cfg() -> PlainAclConfig {
        let mut c = PlainAclConfig::default();
        c.add_yaml(YML, "test").unwrap();
        c
    }

    fn send(topic: &str, ak: &str, secret: &str) -> RemotingCommand {
        let mut ext = ExtFields::new();
        ext.insert("a", "pg");
        ext.insert("b", topic);
        let mut r = RemotingCommand::request(rq::SEND_MESSAGE_V2).with_ext(ext);
        crate::sign::sign(&mut r, ak, secret, None);
        r
    }

    const LOCAL: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));

    #[test]
    fn perms_and_signatures() {
        let c = cfg();
        assert!(validate(&c, &send("topicB", "RocketMQ", "12345678"), LOCAL).is_ok());
        let e = validate(&c, &send("topicA", "RocketMQ", "12345678"), LOCAL).unwrap_err();
        assert_eq!(e, "No default permission for topic:topicA");
        // topicC is SUB only; an unlisted topic falls to DENY.
        assert!(validate(&c, &send("topicC", "RocketMQ", "12345678"), LOCAL).is_err());
        assert!(validate(&c, &send("other", "RocketMQ", "12345678"), LOCAL).is_err());
        let e = validate(&c, &send("topicB", "RocketMQ", "wrong"), LOCAL).unwrap_err();
        assert!(e.starts_with("Check signature failed"));
        let e = validate(&c, &send("topicB", "nobody", "x"), LOCAL).unwrap_err();
        assert_eq!(e, "No acl config for nobody");
        let mut unsigned = send("topicB", "RocketMQ", "12345678");
        unsigned.ext_fields.remove("AccessKey");
        assert_eq!(
            validate(&c, &unsigned, LOCAL).unwrap_err(),
            "No accessKey is configured"
        );
    }

    #[test]
    fn white_addresses_skip_checks() {
        let c = cfg();
        let global = Some("10.10.103.7".parse().unwrap());
        let mut unsigned = send("topicA", "x", "y");
        unsigned.ext_fields.remove("AccessKey");
        assert!(validate(&c, &unsigned, global).is_ok());
        // rocketmq2's white address skips the signature check.
        let account_white = Some("192.168.1.9".parse().unwrap());
        assert!(validate(&c, &send("any", "rocketmq2", "wrong"), account_white).is_ok());
        assert!(validate(&c, &send("any", "rocketmq2", "wrong"), LOCAL).is_err());
    }

    #[test]
    fn admin_codes() {
        let c = cfg();
        let mut ext = ExtFields::new();
        ext.insert("topic", "t");
        let mut r = RemotingCommand::request(rq::UPDATE_AND_CREATE_TOPIC).with_ext(ext);
        crate::sign::sign(&mut r, "RocketMQ", "12345678", None);
        assert!(
            validate(&c, &r, LOCAL)
                .unwrap_err()
                .starts_with("Need admin permission")
        );
    }

    #[test]
    fn bad_files_are_errors() {
        let mut c = PlainAclConfig::default();
        assert!(
            c.add_yaml("accounts:\n  - accessKey: short\n    secretKey: x\n", "f")
                .is_err()
        );
        assert!(c.add_yaml("accounts: [", "f").is_err());
    }
}
