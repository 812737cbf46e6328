//! ACL 2.0's data: users, resources, actions and policies, and their JSON
//! forms (`UserInfo`, `AclInfo`) as `mqadmin` and the Java broker write them.

use serde::{Deserialize, Serialize};

use crate::AuthError;

/// A user's kind: a super user passes every authorization check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserType {
    Super,
    Normal,
}

/// Whether a user may sign in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserStatus {
    Enable,
    Disable,
}

/// One ACL 2.0 user. The password is the HMAC key clients sign with.
#[derive(Clone, PartialEq, Eq)]
pub struct User {
    pub username: String,
    pub password: String,
    pub user_type: UserType,
    pub status: UserStatus,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the password.
        f.debug_struct("User")
            .field("username", &self.username)
            .field("user_type", &self.user_type)
            .field("status", &self.status)
            .finish()
    }
}

/// `UserInfo`: a user as JSON (names as Java writes them: `Super`,
/// `Normal`, `enable`, `disable`; read case-insensitively).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub username: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_status: Option<String>,
}

impl UserType {
    pub fn parse(s: &str) -> Result<Self, AuthError> {
        match s.to_ascii_lowercase().as_str() {
            "super" => Ok(UserType::Super),
            "normal" => Ok(UserType::Normal),
            _ => Err(AuthError::Invalid(format!("unknown user type {s:?}"))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            UserType::Super => "Super",
            UserType::Normal => "Normal",
        }
    }
}

impl UserStatus {
    pub fn parse(s: &str) -> Result<Self, AuthError> {
        match s.to_ascii_lowercase().as_str() {
            "enable" => Ok(UserStatus::Enable),
            "disable" => Ok(UserStatus::Disable),
            _ => Err(AuthError::Invalid(format!("unknown user status {s:?}"))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            UserStatus::Enable => "enable",
            UserStatus::Disable => "disable",
        }
    }
}

impl User {
    /// The JSON form; `with_password` false leaves the password out.
    pub fn info(&self, with_password: bool) -> UserInfo {
        UserInfo {
            username: Some(self.username.clone()),
            password: with_password.then(|| self.password.clone()),
            user_type: Some(self.user_type.name().into()),
            user_status: Some(self.status.name().into()),
        }
    }
}

/// What a resource names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceType {
    /// `*`: every resource of every type.
    Any,
    Cluster,
    Namespace,
    Topic,
    Group,
}

/// How a resource's name matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    Literal,
    /// `name*`: names starting with `name`.
    Prefixed,
    /// `*`: every name.
    Any,
}

/// A resource as policies name it: `Topic:orders`, `Group:billing-*`,
/// `Cluster:*`, or `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resource {
    pub kind: ResourceType,
    pub name: String,
    pub pattern: Pattern,
}

impl Resource {
    /// A concrete resource a request touches.
    pub fn of(kind: ResourceType, name: &str) -> Self {
        Resource {
            kind,
            name: name.to_string(),
            pattern: Pattern::Literal,
        }
    }

    /// Parses `Type:name`, `Type:prefix*`, `Type:*` or `*`.
    pub fn parse(s: &str) -> Result<Self, AuthError> {
        let s = s.trim();
        if s == "*" {
            return Ok(Resource {
                kind: ResourceType::Any,
                name: String::new(),
                pattern: Pattern::Any,
            });
        }
        let (t, name) = s
            .split_once(':')
            .ok_or_else(|| AuthError::Invalid(format!("resource {s:?} is not Type:name")))?;
        let kind = match t.to_ascii_lowercase().as_str() {
            "cluster" => ResourceType::Cluster,
            "namespace" => ResourceType::Namespace,
            "topic" => ResourceType::Topic,
            "group" => ResourceType::Group,
            _ => return Err(AuthError::Invalid(format!("unknown resource type {t:?}"))),
        };
        let (name, pattern) = if name == "*" {
            (String::new(), Pattern::Any)
        } else if let Some(p) = name.strip_suffix('*') {
            (p.to_string(), Pattern::Prefixed)
        } else if name.is_empty() {
            return Err(AuthError::Invalid(format!("resource {s:?} has no name")));
        } else {
            (name.to_string(), Pattern::Literal)
        };
        Ok(Resource {
            kind,
            name,
            pattern,
        })
    }

    fn type_name(&self) -> &'static str {
        match self.kind {
            ResourceType::Any => "*",
            ResourceType::Cluster => "Cluster",
            ResourceType::Namespace => "Namespace",
            ResourceType::Topic => "Topic",
            ResourceType::Group => "Group",
        }
    }

    /// The text form `parse` reads.
    pub fn key(&self) -> String {
        match (self.kind, self.pattern) {
            (ResourceType::Any, _) => "*".into(),
            (_, Pattern::Any) => format!("{}:*", self.type_name()),
            (_, Pattern::Prefixed) => format!("{}:{}*", self.type_name(), self.name),
            (_, Pattern::Literal) => format!("{}:{}", self.type_name(), self.name),
        }
    }

    /// Whether this (policy) resource covers the concrete `r`.
    pub fn matches(&self, r: &Resource) -> bool {
        if self.kind == ResourceType::Any {
            return true;
        }
        if self.kind != r.kind {
            return false;
        }
        match self.pattern {
            Pattern::Any => true,
            Pattern::Literal => self.name == r.name,
            Pattern::Prefixed => r.name.starts_with(&self.name),
        }
    }
}

/// What a request does to a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Pub,
    Sub,
    Create,
    Update,
    Delete,
    Get,
    List,
    /// In a policy: every action.
    All,
}

impl Action {
    pub fn parse(s: &str) -> Result<Self, AuthError> {
        Ok(match s.trim().to_ascii_lowercase().as_str() {
            "pub" => Action::Pub,
            "sub" => Action::Sub,
            "create" => Action::Create,
            "update" => Action::Update,
            "delete" => Action::Delete,
            "get" => Action::Get,
            "list" => Action::List,
            "all" => Action::All,
            _ => return Err(AuthError::Invalid(format!("unknown action {s:?}"))),
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Action::Pub => "Pub",
            Action::Sub => "Sub",
            Action::Create => "Create",
            Action::Update => "Update",
            Action::Delete => "Delete",
            Action::Get => "Get",
            Action::List => "List",
            Action::All => "All",
        }
    }
}

/// A policy entry's verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allow,
    Deny,
}

/// Which of a subject's two policies an entry is in: custom ones are
/// consulted first, the default one only when no custom entry matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyType {
    Custom,
    Default,
}

impl PolicyType {
    pub fn parse(s: Option<&str>) -> Result<Self, AuthError> {
        match s.map(|s| s.trim().to_ascii_lowercase()) {
            None => Ok(PolicyType::Custom),
            Some(s) if s.is_empty() || s == "custom" => Ok(PolicyType::Custom),
            Some(s) if s == "default" => Ok(PolicyType::Default),
            Some(s) => Err(AuthError::Invalid(format!("unknown policy type {s:?}"))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            PolicyType::Custom => "Custom",
            PolicyType::Default => "Default",
        }
    }
}

/// One rule: a resource pattern, the actions it covers, the source
/// addresses it applies to (empty: all) and the verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyEntry {
    pub resource: Resource,
    pub actions: Vec<Action>,
    pub source_ips: Vec<String>,
    pub decision: Decision,
}

/// A subject's rules. Invariant: one entry per resource key in a policy,
/// at most one policy per type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Acl {
    /// `User:name`.
    pub subject: String,
    pub policies: Vec<(PolicyType, Vec<PolicyEntry>)>,
}

/// `AclInfo` as JSON.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AclInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<String>,
    #[serde(default)]
    pub policies: Vec<PolicyInfo>,
}

/// `AclInfo.PolicyInfo`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_type: Option<String>,
    #[serde(default)]
    pub entries: Vec<PolicyEntryInfo>,
}

/// `AclInfo.PolicyEntryInfo`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyEntryInfo {
    #[serde(default)]
    pub resource: Option<String>,
    #[serde(default)]
    pub actions: Vec<String>,
    #[serde(default)]
    pub source_ips: Vec<String>,
    #[serde(default)]
    pub decision: Option<String>,
}

impl Acl {
    /// Parses and checks an `AclInfo`; `subject` is used when it has none.
    pub fn from_info(info: &AclInfo, subject: Option<&str>) -> Result<Acl, AuthError> {
        let subject = info
            .subject
            .as_deref()
            .or(subject)
            .filter(|s| !s.trim().is_empty())
            .ok_or_else(|| AuthError::Invalid("the subject is blank".into()))?;
        if !subject.starts_with("User:") || subject.len() <= 5 {
            return Err(AuthError::Invalid(format!(
                "subject {subject:?} is not User:name"
            )));
        }
        let mut acl = Acl {
            subject: subject.to_string(),
            policies: Vec::new(),
        };
        for p in &info.policies {
            let t = PolicyType::parse(p.policy_type.as_deref())?;
            let mut entries = Vec::new();
            for e in &p.entries {
                entries.push(entry_from_info(e)?);
            }
            acl.merge(t, entries);
        }
        if acl.policies.iter().all(|(_, e)| e.is_empty()) {
            return Err(AuthError::Invalid("the acl has no policy entry".into()));
        }
        Ok(acl)
    }

    /// Adds `entries` to the policy of type `t`, replacing entries with the
    /// same resource (Java `Policy.updateEntry`).
    pub fn merge(&mut self, t: PolicyType, entries: Vec<PolicyEntry>) {
        let idx = match self.policies.iter().position(|(pt, _)| *pt == t) {
            Some(i) => i,
            None => {
                self.policies.push((t, Vec::new()));
                self.policies.len() - 1
            }
        };
        let existing = &mut self.policies[idx].1;
        for e in entries {
            match existing.iter_mut().find(|x| x.resource == e.resource) {
                Some(x) => *x = e,
                None => existing.push(e),
            }
        }
    }

    /// The JSON form.
    pub fn info(&self) -> AclInfo {
        AclInfo {
            subject: Some(self.subject.clone()),
            policies: self
                .policies
                .iter()
                .map(|(t, entries)| PolicyInfo {
                    policy_type: Some(t.name().into()),
                    entries: entries.iter().map(entry_info).collect(),
                })
                .collect(),
        }
    }
}

fn entry_from_info(e: &PolicyEntryInfo) -> Result<PolicyEntry, AuthError> {
    let resource = Resource::parse(
        e.resource
            .as_deref()
            .ok_or_else(|| AuthError::Invalid("a policy entry has no resource".into()))?,
    )?;
    if e.actions.is_empty() {
        return Err(AuthError::Invalid(format!(
            "the entry for {} has no action",
            resource.key()
        )));
    }
    let actions = e
        .actions
        .iter()
        .map(|a| Action::parse(a))
        .collect::<Result<Vec<_>, _>>()?;
    for ip in &e.source_ips {
        crate::ip::IpRule::parse(ip)?;
    }
    let decision = match e
        .decision
        .as_deref()
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("allow") => Decision::Allow,
        Some("deny") => Decision::Deny,
        other => {
            return Err(AuthError::Invalid(format!(
                "decision {other:?} is neither Allow nor Deny"
            )));
        }
    };
    Ok(PolicyEntry {
        resource,
        actions,
        source_ips: e.source_ips.clone(),
        decision,
    })
}

fn entry_info(e: &PolicyEntry) -> PolicyEntryInfo {
    PolicyEntryInfo {
        resource: Some(e.resource.key()),
        actions: e.actions.iter().map(|a| a.name().to_string()).collect(),
        source_ips: e.source_ips.clone(),
        decision: Some(
            match e.decision {
                Decision::Allow => "Allow",
                Decision::Deny => "Deny",
            }
            .into(),
        ),
    }
}
