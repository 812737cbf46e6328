//! Users and ACLs copied from a master to its slaves and ledger followers
//! (Basalt's AUTH_METADATA_SYNC, 30005; docs/auth.md "Replication").
//!
//! The answer holds every password (they are the HMAC keys requests are
//! signed with), so the master answers only a request signed by one of its
//! super users ([`crate::AuthGate::check_sync`]); the follower signs with
//! its own settings' credentials and replaces its users and ACLs with the
//! master's in one step ([`crate::AuthStore::replace`]).

use serde::{Deserialize, Serialize};

use crate::AuthError;
use crate::model::{Acl, AclInfo, UserInfo};
use crate::store::Snapshot;

/// The answer's body: `{"users":[UserInfo with password…],"acls":[AclInfo…]}`.
/// No `Debug`: it holds passwords.
#[derive(Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthMetadata {
    #[serde(default)]
    pub users: Vec<UserInfo>,
    #[serde(default)]
    pub acls: Vec<AclInfo>,
}

impl std::fmt::Debug for AuthMetadata {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthMetadata")
            .field("users", &self.users.len())
            .field("acls", &self.acls.len())
            .finish()
    }
}

impl AuthMetadata {
    /// Everything `snap` holds, passwords included.
    pub fn of(snap: &Snapshot) -> AuthMetadata {
        AuthMetadata {
            users: snap.users.values().map(|u| u.info(true)).collect(),
            acls: snap.acls.values().map(Acl::info).collect(),
        }
    }

    /// The JSON body.
    pub fn encode(&self) -> Result<Vec<u8>, AuthError> {
        serde_json::to_vec(self).map_err(|e| AuthError::Invalid(e.to_string()))
    }

    /// Reads a body; the error never quotes it (it holds passwords).
    pub fn decode(body: &[u8]) -> Result<AuthMetadata, AuthError> {
        serde_json::from_slice(body).map_err(|e| {
            AuthError::Invalid(format!(
                "unreadable users and ACLs at line {} column {}",
                e.line(),
                e.column()
            ))
        })
    }

    /// The users and ACLs, each checked as when it was created. The error
    /// names a user or resource, never a password.
    pub fn snapshot(&self) -> Result<Snapshot, AuthError> {
        Snapshot::from_infos(&self.users, &self.acls)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{User, UserStatus, UserType};

    #[test]
    fn round_trip_keeps_passwords_and_debug_hides_them() {
        let mut snap = Snapshot::default();
        snap.users.insert(
            "alice".into(),
            User {
                username: "alice".into(),
                password: "s3cret-pw".into(),
                user_type: UserType::Normal,
                status: UserStatus::Enable,
            },
        );
        let info = AclInfo {
            subject: Some("User:alice".into()),
            policies: vec![crate::model::PolicyInfo {
                policy_type: None,
                entries: vec![crate::model::PolicyEntryInfo {
                    resource: Some("Topic:t".into()),
                    actions: vec!["Pub".into()],
                    source_ips: vec![],
                    decision: Some("Allow".into()),
                }],
            }],
        };
        let acl = Acl::from_info(&info, None).unwrap();
        snap.acls.insert(acl.subject.clone(), acl);
        let meta = AuthMetadata::of(&snap);
        assert!(!format!("{meta:?}").contains("s3cret-pw"));
        let back = AuthMetadata::decode(&meta.encode().unwrap())
            .unwrap()
            .snapshot()
            .unwrap();
        assert_eq!(back.users, snap.users);
        assert_eq!(back.acls, snap.acls);
    }

    #[test]
    fn bad_bodies_are_refused_without_quoting_them() {
        let e = AuthMetadata::decode(br#"{"users":[{"username":"x","password":"pw-123456"#)
            .unwrap_err();
        assert!(!e.to_string().contains("pw-123456"));
        let blank = AuthMetadata::decode(br#"{"users":[{"username":"x"}]}"#).unwrap();
        assert!(blank.snapshot().is_err());
    }
}
