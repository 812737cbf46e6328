//! The ACL 2.0 users and ACLs: held in memory for the request path, saved
//! through a [`Persist`] (the broker's atomically replaced metadata files)
//! before any change is acknowledged.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};

use crate::AuthError;
use crate::model::{Acl, AclInfo, User, UserInfo, UserStatus, UserType};

/// Where users or ACLs are kept: one JSON document, replaced atomically.
pub trait Persist: Send + Sync {
    /// The last saved document, if any.
    fn load(&self) -> Option<String>;
    /// Replaces the document durably (fsynced) before returning.
    fn save(&self, content: &str) -> Result<(), String>;
}

/// One consistent view of users and ACLs (readers clone the `Arc`).
#[derive(Debug, Default, Clone)]
pub struct Snapshot {
    pub users: BTreeMap<String, User>,
    /// By subject (`User:name`).
    pub acls: BTreeMap<String, Acl>,
}

impl Snapshot {
    /// Users and ACLs from their JSON forms, each checked as when it was
    /// created; the first bad one is the error.
    pub fn from_infos(users: &[UserInfo], acls: &[AclInfo]) -> Result<Snapshot, AuthError> {
        let mut snap = Snapshot::default();
        for i in users {
            let u = user_from_info(i)?;
            snap.users.insert(u.username.clone(), u);
        }
        for i in acls {
            let a = Acl::from_info(i, None)?;
            snap.acls.insert(a.subject.clone(), a);
        }
        Ok(snap)
    }
}

/// Users and ACLs. Invariant: the published snapshot is always what was
/// last saved; a change that cannot be saved is not applied.
pub struct AuthStore {
    current: RwLock<Arc<Snapshot>>,
    /// Serializes changes (held across the save, never by readers).
    writing: Mutex<()>,
    users_file: Box<dyn Persist>,
    acls_file: Box<dyn Persist>,
}

impl std::fmt::Debug for AuthStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = self.snapshot();
        f.debug_struct("AuthStore")
            .field("users", &s.users.len())
            .field("acls", &s.acls.len())
            .finish()
    }
}

fn user_from_info(info: &UserInfo) -> Result<User, AuthError> {
    let username = info
        .username
        .clone()
        .filter(|u| !u.trim().is_empty())
        .ok_or_else(|| AuthError::Invalid("username can not be blank".into()))?;
    let password = info
        .password
        .clone()
        .filter(|p| !p.is_empty())
        .ok_or_else(|| AuthError::Invalid("password can not be blank".into()))?;
    Ok(User {
        username,
        password,
        user_type: match &info.user_type {
            Some(t) => UserType::parse(t)?,
            None => UserType::Normal,
        },
        status: match &info.user_status {
            Some(s) => UserStatus::parse(s)?,
            None => UserStatus::Enable,
        },
    })
}

impl AuthStore {
    /// Loads what `users_file` and `acls_file` hold; unreadable content is
    /// an error (the broker does not start with half its rules).
    pub fn open(
        users_file: Box<dyn Persist>,
        acls_file: Box<dyn Persist>,
    ) -> Result<AuthStore, AuthError> {
        let users: Vec<UserInfo> = match users_file.load() {
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| AuthError::Invalid(format!("users file: {e}")))?,
            None => Vec::new(),
        };
        let acls: Vec<AclInfo> = match acls_file.load() {
            Some(text) => serde_json::from_str(&text)
                .map_err(|e| AuthError::Invalid(format!("acls file: {e}")))?,
            None => Vec::new(),
        };
        let snap = Snapshot::from_infos(&users, &acls)?;
        Ok(AuthStore {
            current: RwLock::new(Arc::new(snap)),
            writing: Mutex::new(()),
            users_file,
            acls_file,
        })
    }

    /// The current users and ACLs.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        Arc::clone(&self.current.read())
    }

    pub fn user(&self, name: &str) -> Option<User> {
        self.snapshot().users.get(name).cloned()
    }

    /// Applies `change` to a copy, saves what changed, then publishes it.
    /// Blocking (it fsyncs): call off the async workers.
    fn change(
        &self,
        change: impl FnOnce(&mut Snapshot) -> Result<(), AuthError>,
    ) -> Result<(), AuthError> {
        let _one = self.writing.lock();
        let old = self.snapshot();
        let mut next = (*old).clone();
        change(&mut next)?;
        if next.users != old.users {
            let infos: Vec<UserInfo> = next.users.values().map(|u| u.info(true)).collect();
            let text =
                serde_json::to_string_pretty(&infos).map_err(|e| AuthError::Io(e.to_string()))?;
            self.users_file.save(&text).map_err(AuthError::Io)?;
        }
        if next.acls != old.acls {
            let infos: Vec<AclInfo> = next.acls.values().map(Acl::info).collect();
            let text =
                serde_json::to_string_pretty(&infos).map_err(|e| AuthError::Io(e.to_string()))?;
            self.acls_file.save(&text).map_err(AuthError::Io)?;
        }
        *self.current.write() = Arc::new(next);
        Ok(())
    }

    /// Replaces every user and ACL with `next` (a master's copy), keeping
    /// the users of `keep` that `next` lacks (the settings' super users,
    /// which this broker signs with). Saves only what differs; returns
    /// whether anything did. Blocking (it fsyncs).
    pub fn replace(&self, mut next: Snapshot, keep: &[User]) -> Result<bool, AuthError> {
        for u in keep {
            next.users
                .entry(u.username.clone())
                .or_insert_with(|| u.clone());
        }
        let mut changed = false;
        self.change(|s| {
            if s.users != next.users || s.acls != next.acls {
                changed = true;
                *s = next;
            }
            Ok(())
        })?;
        Ok(changed)
    }

    /// Adds a user (Java: "The user is existed" when it exists).
    pub fn create_user(&self, info: &UserInfo) -> Result<(), AuthError> {
        let u = user_from_info(info)?;
        self.change(|s| {
            if s.users.contains_key(&u.username) {
                return Err(AuthError::Invalid("The user is existed".into()));
            }
            s.users.insert(u.username.clone(), u);
            Ok(())
        })
    }

    /// Adds the user unless one of that name exists (startup users).
    pub fn ensure_user(&self, user: User) -> Result<(), AuthError> {
        self.change(|s| {
            s.users.entry(user.username.clone()).or_insert(user);
            Ok(())
        })
    }

    /// Changes the given fields of an existing user.
    pub fn update_user(&self, name: &str, info: &UserInfo) -> Result<(), AuthError> {
        let user_type = info.user_type.as_deref().map(UserType::parse).transpose()?;
        let status = info
            .user_status
            .as_deref()
            .map(UserStatus::parse)
            .transpose()?;
        self.change(|s| {
            let u = s
                .users
                .get_mut(name)
                .ok_or_else(|| AuthError::Invalid("The user is not exist".into()))?;
            if let Some(p) = info.password.as_deref().filter(|p| !p.is_empty()) {
                u.password = p.to_string();
            }
            if let Some(t) = user_type {
                u.user_type = t;
            }
            if let Some(st) = status {
                u.status = st;
            }
            Ok(())
        })
    }

    /// Removes a user and its ACL; absent users are not an error.
    pub fn delete_user(&self, name: &str) -> Result<(), AuthError> {
        self.change(|s| {
            s.users.remove(name);
            s.acls.remove(&format!("User:{name}"));
            Ok(())
        })
    }

    /// Creates or merges `acl` (Java's createAcl and updateAcl both merge
    /// into an existing ACL). The subject must be a known user.
    pub fn put_acl(&self, acl: Acl) -> Result<(), AuthError> {
        self.change(|s| {
            let name = &acl.subject["User:".len()..];
            if !s.users.contains_key(name) {
                return Err(AuthError::Invalid(format!(
                    "The subject of {} is not exist",
                    acl.subject
                )));
            }
            match s.acls.get_mut(&acl.subject) {
                Some(old) => {
                    for (t, entries) in acl.policies {
                        old.merge(t, entries);
                    }
                }
                None => {
                    s.acls.insert(acl.subject.clone(), acl);
                }
            }
            Ok(())
        })
    }

    /// Deletes a subject's whole ACL (`resource` None) or one entry of a
    /// policy.
    pub fn delete_acl(
        &self,
        subject: &str,
        policy: crate::model::PolicyType,
        resource: Option<&crate::model::Resource>,
    ) -> Result<(), AuthError> {
        self.change(|s| {
            let Some(resource) = resource else {
                s.acls.remove(subject);
                return Ok(());
            };
            if let Some(acl) = s.acls.get_mut(subject) {
                for (t, entries) in &mut acl.policies {
                    if *t == policy {
                        entries.retain(|e| &e.resource != resource);
                    }
                }
                acl.policies.retain(|(_, e)| !e.is_empty());
                if acl.policies.is_empty() {
                    s.acls.remove(subject);
                }
            }
            Ok(())
        })
    }
}
