//! ACL 2.0 decisions (Java's `UserAuthorizationHandler` and
//! `AclAuthorizationHandler`): a super user passes; otherwise the most
//! specific matching entry of the subject's custom policy, or failing any,
//! of its default policy, decides; no matching entry denies.

use std::net::IpAddr;

use crate::ip::IpRule;
use crate::model::{Acl, Decision, Pattern, PolicyEntry, PolicyType, ResourceType};
use crate::request_map::Need;

fn entry_matches(e: &PolicyEntry, need: &Need, ip: Option<IpAddr>) -> bool {
    use crate::model::Action;
    if !e.resource.matches(&need.resource) {
        return false;
    }
    let action_ok = need
        .actions
        .iter()
        .any(|a| e.actions.contains(a) || e.actions.contains(&Action::All));
    if !action_ok {
        return false;
    }
    if e.source_ips.is_empty() {
        return true;
    }
    // Rules were checked when stored; one that no longer parses matches
    // nothing (fail closed).
    ip.is_some_and(|ip| {
        e.source_ips
            .iter()
            .any(|r| IpRule::parse(r).is_ok_and(|r| r.matches(ip)))
    })
}

/// Sort key: lower is more specific (Java's `comparePolicyEntries`): a typed
/// resource before `*`, a literal before a prefix before `Type:*`, a longer
/// prefix first. On a tie Basalt lets Deny win (see docs/auth.md).
fn specificity(e: &PolicyEntry) -> (u8, u8, usize, u8) {
    let any_type = u8::from(e.resource.kind == ResourceType::Any);
    let (pattern, len) = match e.resource.pattern {
        Pattern::Literal => (0, 0),
        Pattern::Prefixed => (1, usize::MAX - e.resource.name.len()),
        Pattern::Any => (2, 0),
    };
    let allow_last = u8::from(e.decision == Decision::Allow);
    (any_type, pattern, len, allow_last)
}

/// Why a normal user was refused, or Ok.
pub fn decide(acl: Option<&Acl>, need: &Need, ip: Option<IpAddr>) -> Result<(), &'static str> {
    let acl = acl.ok_or("no matched policies.")?;
    for wanted in [PolicyType::Custom, PolicyType::Default] {
        let best = acl
            .policies
            .iter()
            .filter(|(t, _)| *t == wanted)
            .flat_map(|(_, entries)| entries.iter())
            .filter(|e| entry_matches(e, need, ip))
            .min_by_key(|e| specificity(e));
        if let Some(e) = best {
            return match e.decision {
                Decision::Allow => Ok(()),
                Decision::Deny => Err("the decision is deny."),
            };
        }
    }
    Err("no matched policies.")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AclInfo, Action, PolicyEntryInfo, PolicyInfo, Resource};

    fn acl(entries: &[(&str, &[&str], &str, &[&str])]) -> Acl {
        let info = AclInfo {
            subject: Some("User:u".into()),
            policies: vec![PolicyInfo {
                policy_type: None,
                entries: entries
                    .iter()
                    .map(|(r, a, d, ips)| PolicyEntryInfo {
                        resource: Some(r.to_string()),
                        actions: a.iter().map(|s| s.to_string()).collect(),
                        source_ips: ips.iter().map(|s| s.to_string()).collect(),
                        decision: Some(d.to_string()),
                    })
                    .collect(),
            }],
        };
        Acl::from_info(&info, None).unwrap()
    }

    fn need(r: &str, a: Action) -> Need {
        Need {
            resource: Resource::parse(r).unwrap(),
            actions: vec![a],
        }
    }

    const LOCAL: Option<IpAddr> = Some(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));

    #[test]
    fn most_specific_wins() {
        let a = acl(&[
            ("Topic:*", &["Pub"], "Allow", &[]),
            ("Topic:secret-*", &["Pub"], "Deny", &[]),
            ("Topic:secret-ok", &["Pub"], "Allow", &[]),
        ]);
        assert!(decide(Some(&a), &need("Topic:x", Action::Pub), LOCAL).is_ok());
        assert!(decide(Some(&a), &need("Topic:secret-1", Action::Pub), LOCAL).is_err());
        assert!(decide(Some(&a), &need("Topic:secret-ok", Action::Pub), LOCAL).is_ok());
        assert!(decide(Some(&a), &need("Topic:x", Action::Sub), LOCAL).is_err());
        assert!(decide(None, &need("Topic:x", Action::Pub), LOCAL).is_err());
    }

    #[test]
    fn all_and_source_ips() {
        let a = acl(&[("Group:g", &["All"], "Allow", &["10.0.0.0/8"])]);
        let inside = Some("10.1.2.3".parse().unwrap());
        assert!(decide(Some(&a), &need("Group:g", Action::Sub), inside).is_ok());
        assert!(decide(Some(&a), &need("Group:g", Action::Sub), LOCAL).is_err());
    }

    #[test]
    fn deny_wins_a_tie() {
        let a = acl(&[("Topic:t", &["Pub"], "Allow", &[])]);
        let mut b = a.clone();
        b.merge(
            PolicyType::Custom,
            vec![PolicyEntry {
                resource: Resource::parse("Topic:t*").unwrap(),
                actions: vec![Action::Pub],
                source_ips: vec![],
                decision: Decision::Deny,
            }],
        );
        // The literal entry is more specific than the prefix.
        assert!(decide(Some(&b), &need("Topic:t", Action::Pub), LOCAL).is_ok());
    }
}
