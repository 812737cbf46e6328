//! `basalt admin user|acl`: ACL 2.0 users and ACLs through the auth admin
//! codes 3001–3010, with the options, requests and (in shape) the output
//! of `mqadmin createUser … listAcl` (docs/auth.md#the-cli). Changes go to
//! one broker (`-b`) or, as mqadmin does, to every broker of a cluster
//! (`-c`, masters and slaves: users and ACLs are not replicated); reads
//! ask one broker or every master.

use basalt_auth::model::{
    AclInfo, Action, PolicyEntryInfo, PolicyInfo, PolicyType, Resource, UserInfo, UserStatus,
    UserType,
};
use basalt_client::{Admin, ClientError};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

use crate::admin_output::{Report, TableId};

/// Where a verb goes: `-b ADDR` or `-c CLUSTER` (one of them).
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct Target {
    /// One broker address (ip:port).
    #[arg(short = 'b', long = "broker")]
    pub broker: Option<String>,
    /// Every broker of this cluster (reads: every master).
    #[arg(short = 'c', long = "cluster")]
    pub cluster: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Create a user (mqadmin createUser).
    Create {
        #[command(flatten)]
        on: Target,
        #[arg(short, long)]
        username: String,
        /// The password clients sign with (shows in the process list).
        #[arg(short, long)]
        password: String,
        /// Super or Normal (the broker's default: Normal).
        #[arg(short = 't', long = "user-type")]
        user_type: Option<String>,
    },
    /// Change a user's password, type or status (mqadmin updateUser).
    Update {
        #[command(flatten)]
        on: Target,
        #[arg(short, long)]
        username: String,
        #[arg(short, long, required_unless_present_any = ["user_type", "status"])]
        password: Option<String>,
        /// Super or Normal.
        #[arg(short = 't', long = "user-type")]
        user_type: Option<String>,
        /// enable or disable.
        #[arg(short = 's', long = "status")]
        status: Option<String>,
    },
    /// Delete a user and its ACL (mqadmin deleteUser).
    Delete {
        #[command(flatten)]
        on: Target,
        #[arg(short, long)]
        username: String,
    },
    /// One user: name, type, status (never the password).
    Get {
        #[command(flatten)]
        on: Target,
        #[arg(short, long)]
        username: String,
    },
    /// Users whose name contains the filter.
    List {
        #[command(flatten)]
        on: Target,
        #[arg(short, long)]
        filter: Option<String>,
    },
}

/// The policy entries of `acl create|update`.
#[derive(Debug, Args)]
pub struct AclEntries {
    /// `User:name` (a bare name means User:name).
    #[arg(short, long)]
    pub subject: String,
    /// Comma list of resources: Topic:t, Group:g, Topic:prefix*, Topic:*, *.
    #[arg(short, long)]
    pub resources: String,
    /// Comma list of Pub, Sub, Create, Update, Delete, Get, List, All.
    #[arg(short, long)]
    pub actions: String,
    /// Comma list of source addresses or CIDR blocks (default: anywhere).
    #[arg(short = 'i', long = "source-ip")]
    pub source_ips: Option<String>,
    /// Allow or Deny.
    #[arg(short, long)]
    pub decision: String,
}

#[derive(Debug, Subcommand)]
pub enum AclCommand {
    /// Add policy entries to a subject's ACL (mqadmin createAcl).
    Create {
        #[command(flatten)]
        on: Target,
        #[command(flatten)]
        entries: AclEntries,
    },
    /// Add or replace policy entries (mqadmin updateAcl).
    Update {
        #[command(flatten)]
        on: Target,
        #[command(flatten)]
        entries: AclEntries,
    },
    /// Delete one resource's entry, or the subject's whole ACL (mqadmin
    /// deleteAcl).
    Delete {
        #[command(flatten)]
        on: Target,
        #[arg(short, long)]
        subject: String,
        /// Only this resource's entry.
        #[arg(short, long)]
        resource: Option<String>,
        /// Custom (the default) or Default.
        #[arg(long)]
        policy_type: Option<String>,
    },
    /// A subject's ACL, one row per policy entry.
    Get {
        #[command(flatten)]
        on: Target,
        #[arg(short, long)]
        subject: String,
    },
    /// ACLs whose subject contains `-s` and with an entry whose resource
    /// contains `-r`.
    List {
        #[command(flatten)]
        on: Target,
        #[arg(short, long)]
        subject: Option<String>,
        #[arg(short, long)]
        resource: Option<String>,
    },
}

fn err(e: ClientError) -> String {
    e.to_string()
}

/// The brokers a change goes to: `-b`, or every broker of the cluster
/// (masters and slaves, as mqadmin's `fetchMasterAndSlaveAddrByClusterName`).
async fn write_targets(admin: &Admin, on: Target) -> Result<Vec<String>, String> {
    match (on.broker, on.cluster) {
        (Some(b), _) => Ok(vec![b]),
        (None, Some(c)) => {
            let all = admin.cluster_brokers(&c).await.map_err(err)?;
            if all.is_empty() {
                return Err(format!("cluster {c} has no broker"));
            }
            Ok(all)
        }
        (None, None) => Err("give -b BROKER or -c CLUSTER".into()),
    }
}

/// The brokers a read asks: `-b`, or every master of the cluster.
async fn read_targets(admin: &Admin, on: Target) -> Result<Vec<String>, String> {
    match (on.broker, on.cluster) {
        (Some(b), _) => Ok(vec![b]),
        (None, Some(c)) => {
            let mut m: Vec<String> = admin
                .cluster_masters(&c)
                .await
                .map_err(err)?
                .into_iter()
                .map(|(_, addr)| addr)
                .collect();
            if m.is_empty() {
                return Err(format!("cluster {c} has no master"));
            }
            m.sort();
            Ok(m)
        }
        (None, None) => Err("give -b BROKER or -c CLUSTER".into()),
    }
}

/// `name` or `User:name` as a subject.
pub fn subject(s: &str) -> Result<String, String> {
    let s = s.trim();
    let name = s.strip_prefix("User:").unwrap_or(s);
    if name.is_empty() || name.contains(':') {
        return Err(format!("subject {s:?} is not User:name"));
    }
    Ok(format!("User:{name}"))
}

/// A comma list, trimmed, empty items dropped (mqadmin's `StringUtils.split`).
fn comma_list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|v| !v.is_empty())
        .map(str::to_string)
        .collect()
}

/// `acl create|update`'s body: one Custom-less policy (as mqadmin's
/// `AclInfo.of`) with an entry per resource, each with every action,
/// source address and the decision. Names are checked and written the
/// way the broker writes them back.
pub fn acl_body(e: &AclEntries) -> Result<AclInfo, String> {
    let subject = subject(&e.subject)?;
    let resources = comma_list(&e.resources);
    if resources.is_empty() {
        return Err("-r: no resource".into());
    }
    let resources = resources
        .iter()
        .map(|r| Resource::parse(r).map(|r| r.key()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("-r: {e}"))?;
    let actions = comma_list(&e.actions)
        .iter()
        .map(|a| Action::parse(a).map(|a| a.name().to_string()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("-a: {e}"))?;
    if actions.is_empty() {
        return Err("-a: no action".into());
    }
    let source_ips = e.source_ips.as_deref().map(comma_list).unwrap_or_default();
    for ip in &source_ips {
        basalt_auth::ip::IpRule::parse(ip).map_err(|e| format!("-i: {e}"))?;
    }
    let decision = match e.decision.trim().to_ascii_lowercase().as_str() {
        "allow" => "Allow",
        "deny" => "Deny",
        _ => return Err(format!("-d {:?}: Allow or Deny", e.decision)),
    };
    let entries = resources
        .into_iter()
        .map(|r| PolicyEntryInfo {
            resource: Some(r),
            actions: actions.clone(),
            source_ips: source_ips.clone(),
            decision: Some(decision.into()),
        })
        .collect();
    Ok(AclInfo {
        subject: Some(subject),
        policies: vec![PolicyInfo {
            policy_type: None,
            entries,
        }],
    })
}

/// `user create|update`'s body, type and status checked and normalised.
pub fn user_body(
    username: &str,
    password: Option<&str>,
    user_type: Option<&str>,
    status: Option<&str>,
) -> Result<UserInfo, String> {
    let username = username.trim();
    if username.is_empty() {
        return Err("-u: the username is blank".into());
    }
    let user_type = user_type
        .map(|t| UserType::parse(t.trim()).map(|t| t.name().to_string()))
        .transpose()
        .map_err(|e| format!("-t: {e} (Super or Normal)"))?;
    let user_status = status
        .map(|s| UserStatus::parse(s.trim()).map(|s| s.name().to_string()))
        .transpose()
        .map_err(|e| format!("-s: {e} (enable or disable)"))?;
    Ok(UserInfo {
        username: Some(username.to_string()),
        password: password.map(|p| p.trim().to_string()),
        user_type,
        user_status,
    })
}

/// One line per broker written, as mqadmin prints them, and a JSON list.
fn written(r: &mut Report, what: &str, brokers: &[String]) {
    let t = r.json_table("brokers", &["broker"]);
    for b in brokers {
        r.row(t, vec![json!(b)]);
        r.text(format!("{what} to {b} success."));
    }
}

/// `basalt admin user ...`.
pub async fn user(admin: &Admin, cmd: UserCommand) -> Result<Report, String> {
    let mut r = Report::new();
    match cmd {
        UserCommand::Create {
            on,
            username,
            password,
            user_type,
        } => {
            let body = user_body(&username, Some(&password), user_type.as_deref(), None)?;
            let brokers = write_targets(admin, on).await?;
            for b in &brokers {
                admin.create_user(b, &body).await.map_err(err)?;
            }
            written(&mut r, "create user", &brokers);
            r.field("user", username, "");
        }
        UserCommand::Update {
            on,
            username,
            password,
            user_type,
            status,
        } => {
            let body = user_body(
                &username,
                password.as_deref(),
                user_type.as_deref(),
                status.as_deref(),
            )?;
            let brokers = write_targets(admin, on).await?;
            for b in &brokers {
                admin.update_user(b, &body).await.map_err(err)?;
            }
            written(&mut r, "update user", &brokers);
            r.field("user", username, "");
        }
        UserCommand::Delete { on, username } => {
            let brokers = write_targets(admin, on).await?;
            for b in &brokers {
                admin.delete_user(b, username.trim()).await.map_err(err)?;
            }
            written(&mut r, "delete user", &brokers);
            r.field("user", username, "");
        }
        UserCommand::Get { on, username } => {
            let t = user_table(&mut r);
            let mut found = 0;
            for b in read_targets(admin, on).await? {
                if let Some(u) = admin.get_user(&b, username.trim()).await.map_err(err)? {
                    user_row(&mut r, t, &b, &u);
                    found += 1;
                }
            }
            if found == 0 {
                return Err(format!("no user {username}"));
            }
        }
        UserCommand::List { on, filter } => {
            let t = user_table(&mut r);
            let mut n = 0;
            for b in read_targets(admin, on).await? {
                for u in admin.list_users(&b, filter.as_deref()).await.map_err(err)? {
                    user_row(&mut r, t, &b, &u);
                    n += 1;
                }
            }
            r.field("count", n, format!("{n} user(s)"));
        }
    }
    Ok(r)
}

fn user_table(r: &mut Report) -> TableId {
    r.table("users", &["broker", "userName", "userType", "userStatus"])
}

fn user_row(r: &mut Report, t: TableId, broker: &str, u: &UserInfo) {
    r.row(
        t,
        vec![
            json!(broker),
            json!(u.username),
            json!(u.user_type),
            json!(u.user_status),
        ],
    );
}

/// `basalt admin acl ...`.
pub async fn acl(admin: &Admin, cmd: AclCommand) -> Result<Report, String> {
    let mut r = Report::new();
    match cmd {
        AclCommand::Create { on, entries } => put_acl(admin, on, &entries, false, &mut r).await?,
        AclCommand::Update { on, entries } => put_acl(admin, on, &entries, true, &mut r).await?,
        AclCommand::Delete {
            on,
            subject: s,
            resource,
            policy_type,
        } => {
            let s = subject(&s)?;
            if let Some(p) = &policy_type {
                PolicyType::parse(Some(p)).map_err(|e| format!("--policy-type: {e}"))?;
            }
            let resource = resource
                .map(|res| Resource::parse(&res).map(|x| x.key()))
                .transpose()
                .map_err(|e| format!("-r: {e}"))?;
            let brokers = write_targets(admin, on).await?;
            for b in &brokers {
                admin
                    .delete_acl(b, &s, policy_type.as_deref(), resource.as_deref())
                    .await
                    .map_err(err)?;
            }
            written(&mut r, "delete acl", &brokers);
            r.field("subject", s, "");
        }
        AclCommand::Get { on, subject: s } => {
            let s = subject(&s)?;
            let t = acl_table(&mut r);
            let mut found = 0;
            for b in read_targets(admin, on).await? {
                if let Some(a) = admin.get_acl(&b, &s).await.map_err(err)? {
                    acl_rows(&mut r, t, &b, &a);
                    found += 1;
                }
            }
            if found == 0 {
                return Err(format!("no acl for {s}"));
            }
        }
        AclCommand::List {
            on,
            subject: s,
            resource,
        } => {
            let t = acl_table(&mut r);
            let mut n = 0;
            for b in read_targets(admin, on).await? {
                let list = admin
                    .list_acls(&b, s.as_deref(), resource.as_deref())
                    .await
                    .map_err(err)?;
                for a in &list {
                    acl_rows(&mut r, t, &b, a);
                }
                n += list.len();
            }
            r.field("count", n, format!("{n} acl(s)"));
        }
    }
    Ok(r)
}

/// `acl create` (3006) and `acl update` (3007): the same body.
async fn put_acl(
    admin: &Admin,
    on: Target,
    entries: &AclEntries,
    update: bool,
    r: &mut Report,
) -> Result<(), String> {
    let body = acl_body(entries)?;
    let brokers = write_targets(admin, on).await?;
    for b in &brokers {
        if update {
            admin.update_acl(b, &body).await.map_err(err)?;
        } else {
            admin.create_acl(b, &body).await.map_err(err)?;
        }
    }
    let verb = if update { "update acl" } else { "create acl" };
    written(r, verb, &brokers);
    r.field("subject", body.subject.unwrap_or_default(), "");
    Ok(())
}

fn acl_table(r: &mut Report) -> TableId {
    r.table(
        "acls",
        &[
            "broker",
            "subject",
            "policyType",
            "resource",
            "actions",
            "sourceIps",
            "decision",
        ],
    )
}

fn acl_rows(r: &mut Report, t: TableId, broker: &str, a: &AclInfo) {
    for p in &a.policies {
        for e in &p.entries {
            r.row(
                t,
                vec![
                    json!(broker),
                    json!(a.subject),
                    json!(p.policy_type),
                    json!(e.resource),
                    json!(e.actions.join(",")),
                    if e.source_ips.is_empty() {
                        Value::Null
                    } else {
                        json!(e.source_ips.join(","))
                    },
                    json!(e.decision),
                ],
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{AdminCommand, Cli, Command};
    use clap::Parser;

    fn parse(args: &[&str]) -> Result<AdminCommand, clap::Error> {
        let mut all = vec!["basalt", "admin"];
        all.extend_from_slice(args);
        let cli = Cli::try_parse_from(all)?;
        match cli.command {
            Command::Admin(a) => Ok(a.command),
            other => panic!("not admin: {other:?}"),
        }
    }

    fn entries(r: &str, a: &str, i: Option<&str>, d: &str) -> AclEntries {
        AclEntries {
            subject: "alice".into(),
            resources: r.into(),
            actions: a.into(),
            source_ips: i.map(str::to_string),
            decision: d.into(),
        }
    }

    #[test]
    fn acl_body_is_one_policy_with_an_entry_per_resource() {
        let body = acl_body(&entries(
            " Topic:a , group:g*,,",
            "pub, SUB",
            Some("10.0.0.0/8, 127.0.0.1"),
            "allow",
        ))
        .unwrap();
        let j = serde_json::to_value(&body).unwrap();
        println!("body: {j}");
        assert_eq!(
            j,
            json!({"subject": "User:alice", "policies": [{"entries": [
                {"resource": "Topic:a", "actions": ["Pub", "Sub"],
                 "sourceIps": ["10.0.0.0/8", "127.0.0.1"], "decision": "Allow"},
                {"resource": "Group:g*", "actions": ["Pub", "Sub"],
                 "sourceIps": ["10.0.0.0/8", "127.0.0.1"], "decision": "Allow"},
            ]}]})
        );
        let no_ip = acl_body(&entries("*", "All", None, "Deny")).unwrap();
        assert_eq!(no_ip.policies[0].entries[0].source_ips.len(), 0);
        assert_eq!(
            no_ip.policies[0].entries[0].decision.as_deref(),
            Some("Deny")
        );
    }

    #[test]
    fn acl_body_refuses_what_the_broker_would() {
        for (e, want) in [
            (entries("Queue:a", "Pub", None, "Allow"), "-r"),
            (entries(" , ", "Pub", None, "Allow"), "-r"),
            (entries("Topic:a", "Publish", None, "Allow"), "-a"),
            (entries("Topic:a", ",", None, "Allow"), "-a"),
            (entries("Topic:a", "Pub", Some("1.2.3"), "Allow"), "-i"),
            (entries("Topic:a", "Pub", None, "Maybe"), "-d"),
        ] {
            let got = acl_body(&e).unwrap_err();
            println!("{e:?} -> {got}");
            assert!(got.starts_with(want), "{got}");
        }
    }

    #[test]
    fn subjects_take_a_bare_name() {
        assert_eq!(subject("alice").unwrap(), "User:alice");
        assert_eq!(subject(" User:bob ").unwrap(), "User:bob");
        assert!(subject("User:").is_err());
        assert!(subject("Group:x").is_err());
    }

    #[test]
    fn user_body_normalises_type_and_status() {
        let u = user_body(" bob ", Some("pw"), Some("super"), Some("DISABLE")).unwrap();
        let j = serde_json::to_value(&u).unwrap();
        println!("body: {j}");
        assert_eq!(
            j,
            json!({"username": "bob", "password": "pw", "userType": "Super", "userStatus": "disable"})
        );
        // updateUser with only a status: nothing else in the body.
        let u = user_body("bob", None, None, Some("enable")).unwrap();
        assert_eq!(
            serde_json::to_value(&u).unwrap(),
            json!({"username": "bob", "userStatus": "enable"})
        );
        assert!(
            user_body("bob", None, Some("root"), None)
                .unwrap_err()
                .starts_with("-t")
        );
        assert!(
            user_body("bob", None, None, Some("off"))
                .unwrap_err()
                .starts_with("-s")
        );
        assert!(user_body(" ", Some("p"), None, None).is_err());
    }

    #[test]
    fn options_are_mqadmins() {
        let c = parse(&[
            "user", "create", "-b", "h:1", "-u", "u1", "-p", "pw", "-t", "Normal",
        ])
        .unwrap();
        println!("{c:?}");
        assert!(matches!(
            c,
            AdminCommand::User(UserCommand::Create { ref on, ref username, ref user_type, .. })
                if on.broker.as_deref() == Some("h:1") && username == "u1"
                    && user_type.as_deref() == Some("Normal")
        ));
        // -b or -c, not both, not neither.
        assert!(parse(&["user", "list", "-b", "h:1", "-c", "C"]).is_err());
        assert!(parse(&["user", "list"]).is_err());
        // updateUser needs something to change.
        assert!(parse(&["user", "update", "-c", "C", "-u", "u1"]).is_err());
        let c = parse(&["user", "update", "-c", "C", "-u", "u1", "-s", "disable"]).unwrap();
        assert!(
            matches!(c, AdminCommand::User(UserCommand::Update { ref status, .. })
            if status.as_deref() == Some("disable"))
        );
        let c = parse(&[
            "acl",
            "create",
            "-c",
            "C",
            "-s",
            "User:u1",
            "-r",
            "Topic:a,Topic:b",
            "-a",
            "Pub",
            "-i",
            "127.0.0.1",
            "-d",
            "Allow",
        ])
        .unwrap();
        println!("{c:?}");
        assert!(
            matches!(c, AdminCommand::Acl(AclCommand::Create { ref entries, .. })
            if entries.resources == "Topic:a,Topic:b" && entries.source_ips.as_deref() == Some("127.0.0.1"))
        );
        // -d is required, as in mqadmin.
        assert!(
            parse(&[
                "acl", "update", "-b", "h:1", "-s", "u", "-r", "Topic:a", "-a", "Pub"
            ])
            .is_err()
        );
        let c = parse(&["acl", "delete", "-b", "h:1", "-s", "u", "-r", "Topic:a"]).unwrap();
        assert!(
            matches!(c, AdminCommand::Acl(AclCommand::Delete { ref resource, .. })
            if resource.as_deref() == Some("Topic:a"))
        );
    }
}
