//! `basalt admin ledger status|transfer`: every ledger-mode broker group of
//! a cluster as its members see it, and leadership transfer
//! (docs/ledger-protocol.md#operations).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use basalt_client::Admin;
use basalt_remoting::protocol::LedgerGroupStatus;

/// How long `transfer` waits for a member to report the new leader.
const NEW_LEADER_WAIT: Duration = Duration::from_secs(15);

/// One member's answer, or why it did not answer.
#[derive(Debug)]
pub struct MemberView {
    pub broker_addr: String,
    pub status: Option<LedgerGroupStatus>,
    pub error: Option<String>,
}

/// The members of one broker group (`brokerName`).
#[derive(Debug)]
pub struct GroupView {
    pub broker_name: String,
    pub members: Vec<MemberView>,
}

impl GroupView {
    /// The member that reports itself leader in the highest term.
    fn leader(&self) -> Option<(&str, &LedgerGroupStatus)> {
        self.members
            .iter()
            .filter_map(|m| m.status.as_ref().map(|s| (m.broker_addr.as_str(), s)))
            .filter(|(_, s)| s.role == "LEADER")
            .max_by_key(|(_, s)| s.term)
    }
}

/// Every member of every broker group in `cluster` (or of `broker_name`
/// only), asked directly for its ledger status.
pub async fn collect(
    admin: &Admin,
    cluster: &str,
    broker_name: Option<&str>,
) -> Result<Vec<GroupView>, String> {
    let info = admin.cluster_info().await.map_err(|e| e.to_string())?;
    let names = info
        .cluster_addr_table
        .get(cluster)
        .ok_or_else(|| format!("cluster {cluster} is not known to the NameServer"))?;
    let mut names: Vec<&String> = names
        .iter()
        .filter(|n| broker_name.is_none_or(|b| b == n.as_str()))
        .collect();
    names.sort();
    if names.is_empty() {
        return Err(format!(
            "no broker group {} in cluster {cluster}",
            broker_name.unwrap_or("")
        ));
    }
    let mut groups = Vec::new();
    for name in names {
        let Some(bd) = info.broker_addr_table.get(name.as_str()) else {
            continue;
        };
        let addrs: BTreeMap<_, _> = bd.broker_addrs.iter().collect();
        let mut members = Vec::new();
        for addr in addrs.values() {
            let (status, error) = match admin.ledger_status(addr).await {
                Ok(s) => (Some(s), None),
                Err(e) => (None, Some(e.to_string())),
            };
            members.push(MemberView {
                broker_addr: addr.to_string(),
                status,
                error,
            });
        }
        groups.push(GroupView {
            broker_name: name.clone(),
            members,
        });
    }
    Ok(groups)
}

/// `basalt admin ledger status`.
pub async fn status(
    admin: &Admin,
    cluster: &str,
    broker_name: Option<&str>,
    json: bool,
) -> Result<(), String> {
    let groups = collect(admin, cluster, broker_name).await?;
    if json {
        let text =
            serde_json::to_string_pretty(&groups_json(&groups)).map_err(|e| e.to_string())?;
        println!("{text}");
        return Ok(());
    }
    for g in &groups {
        print_group(g);
    }
    Ok(())
}

/// `[{"brokerName", "members": [{"brokerAddr", "status" | "error"}]}]`.
fn groups_json(groups: &[GroupView]) -> serde_json::Value {
    let groups: Vec<serde_json::Value> = groups
        .iter()
        .map(|g| {
            let members: Vec<serde_json::Value> = g
                .members
                .iter()
                .map(|m| match (&m.status, &m.error) {
                    (Some(s), _) => serde_json::json!({"brokerAddr": m.broker_addr, "status": s}),
                    (None, e) => serde_json::json!({"brokerAddr": m.broker_addr, "error": e}),
                })
                .collect();
            serde_json::json!({"brokerName": g.broker_name, "members": members})
        })
        .collect();
    serde_json::Value::Array(groups)
}

fn print_group(g: &GroupView) {
    let leader = g.leader();
    match leader {
        Some((addr, s)) => println!(
            "broker group {} (ledger group {}): leader {} at {addr}, term {}, committed {}{}",
            g.broker_name,
            s.group,
            s.self_id,
            s.term,
            s.committed_index,
            if s.transferee_id.is_empty() {
                String::new()
            } else {
                format!(", transferring to {}", s.transferee_id)
            }
        ),
        None => println!("broker group {}: no leader reported", g.broker_name),
    }
    println!(
        "  {:<8} {:<12} {:>5} {:<8} {:<22} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}",
        "member",
        "role",
        "term",
        "leader",
        "broker",
        "begin",
        "end",
        "committed",
        "dispatched",
        "match",
        "lag"
    );
    // Match index and lag as the leader sees them.
    let progress: BTreeMap<&str, (i64, i64)> = leader
        .map(|(_, s)| {
            s.peers
                .iter()
                .map(|p| (p.id.as_str(), (p.match_index, p.lag)))
                .collect()
        })
        .unwrap_or_default();
    for m in &g.members {
        match &m.status {
            Some(s) => {
                let (mi, lag) = progress
                    .get(s.self_id.as_str())
                    .copied()
                    .unwrap_or((-1, -1));
                let show = |v: i64| {
                    if v < 0 {
                        "-".to_string()
                    } else {
                        v.to_string()
                    }
                };
                println!(
                    "  {:<8} {:<12} {:>5} {:<8} {:<22} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}",
                    s.self_id,
                    s.role,
                    s.term,
                    if s.leader_id.is_empty() {
                        "-"
                    } else {
                        &s.leader_id
                    },
                    m.broker_addr,
                    s.begin_index,
                    s.end_index,
                    s.committed_index,
                    s.dispatched_index,
                    show(mi),
                    show(lag)
                );
            }
            None => println!(
                "  {:<8} {:<12} {:>5} {:<8} {:<22} {}",
                "?",
                "UNREACHABLE",
                "-",
                "-",
                m.broker_addr,
                m.error.as_deref().unwrap_or("")
            ),
        }
    }
}

/// `basalt admin ledger transfer --to ID`: asks the group's leader to hand
/// over to `to`, then waits until a member reports `to` as its leader.
pub async fn transfer(
    admin: &Admin,
    cluster: &str,
    broker_name: Option<&str>,
    to: &str,
    json: bool,
) -> Result<(), String> {
    let groups = collect(admin, cluster, broker_name).await?;
    let [g] = groups.as_slice() else {
        return Err(format!(
            "cluster {cluster} has {} broker groups; name one with --broker-name",
            groups.len()
        ));
    };
    let Some((addr, s)) = g.leader() else {
        return Err(format!("broker group {} has no leader now", g.broker_name));
    };
    let (from, old_term) = (s.self_id.clone(), s.term);
    if from == to {
        return Err(format!("{to} already leads broker group {}", g.broker_name));
    }
    let started = Instant::now();
    admin
        .ledger_transfer(addr, to)
        .await
        .map_err(|e| e.to_string())?;
    let mut seen = None;
    while started.elapsed() < NEW_LEADER_WAIT {
        let now = collect(admin, cluster, Some(&g.broker_name)).await?;
        if let Some((_, s)) = now.first().and_then(|g| g.leader())
            && s.self_id == to
            && s.term > old_term
        {
            seen = Some(s.term);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let Some(term) = seen else {
        return Err(format!(
            "{from} stepped down, but {to} was not seen leading within {NEW_LEADER_WAIT:?}"
        ));
    };
    let took = started.elapsed().as_millis();
    if json {
        println!(
            "{}",
            serde_json::json!({"brokerName": g.broker_name, "from": from, "to": to, "term": term, "tookMs": took})
        );
    } else {
        println!(
            "leadership of {} moved from {from} to {to} (term {old_term} -> {term}) in {took} ms",
            g.broker_name
        );
    }
    Ok(())
}
