//! [`AuthGate`]: the check run on every request before dispatch.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use basalt_remoting::RemotingCommand;
use basalt_remoting::code::response;
use parking_lot::Mutex;

use crate::evaluate;
use crate::model::{UserStatus, UserType};
use crate::plain_acl::PlainAcl;
use crate::request_map;
use crate::settings::AuthSettings;
use crate::sign::{self, ACCESS_KEY};
use crate::store::AuthStore;

/// A refused request: the response code and remark to answer with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub code: i32,
    pub remark: String,
    /// Why, as `/metrics` labels it ([`Reason::name`]).
    pub reason: &'static str,
}

/// Why a request was refused, as `/metrics` counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason {
    /// No `AccessKey`.
    NoCredentials,
    /// An `AccessKey` no user or account has.
    UnknownUser,
    /// A disabled user.
    DisabledUser,
    /// A missing or wrong signature.
    BadSignature,
    /// Signed correctly, but not allowed.
    Denied,
    /// The request could not be read for its resources.
    BadRequest,
}

impl Reason {
    pub const ALL: [Reason; 6] = [
        Reason::NoCredentials,
        Reason::UnknownUser,
        Reason::DisabledUser,
        Reason::BadSignature,
        Reason::Denied,
        Reason::BadRequest,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Reason::NoCredentials => "no_credentials",
            Reason::UnknownUser => "unknown_user",
            Reason::DisabledUser => "disabled_user",
            Reason::BadSignature => "bad_signature",
            Reason::Denied => "denied",
            Reason::BadRequest => "bad_request",
        }
    }
}

/// How often one address's failures are logged at most.
const LOG_EVERY: Duration = Duration::from_secs(10);
/// Addresses remembered for rate-bounding (the table is cleared when full).
const LOG_TABLE_MAX: usize = 4096;

/// When an address's refusals were last logged, and how many since.
type LogState = (Option<Instant>, u64);

/// Failure counters and the per-address log limiter.
#[derive(Debug, Default)]
struct Failures {
    counts: [AtomicU64; 6],
    /// Per address: when it was last logged, failures since.
    /// `None`: never logged yet.
    last_logged: Mutex<HashMap<Option<IpAddr>, LogState>>,
}

/// The broker's (or NameServer's) authentication and authorization check.
/// Invariant: with every switch off, `check` passes everything and costs
/// one branch.
#[derive(Debug)]
pub struct AuthGate {
    settings: AuthSettings,
    cluster: String,
    store: Option<Arc<AuthStore>>,
    plain: Option<Arc<PlainAcl>>,
    failures: Failures,
}

impl AuthGate {
    /// A gate over `store` (ACL 2.0) and `plain` (ACL 1.0), for a broker of
    /// `cluster`. A NameServer passes no store: only the users the settings
    /// name exist there.
    pub fn new(
        settings: AuthSettings,
        cluster: &str,
        store: Option<Arc<AuthStore>>,
        plain: Option<Arc<PlainAcl>>,
    ) -> AuthGate {
        AuthGate {
            settings,
            cluster: cluster.to_string(),
            store,
            plain,
            failures: Failures::default(),
        }
    }

    pub fn settings(&self) -> &AuthSettings {
        &self.settings
    }

    pub fn store(&self) -> Option<&Arc<AuthStore>> {
        self.store.as_ref()
    }

    /// The ACL 1.0 files, when `aclEnable` is on.
    pub fn plain(&self) -> Option<&Arc<PlainAcl>> {
        self.plain.as_ref()
    }

    /// Whether any check is on.
    pub fn enabled(&self) -> bool {
        self.settings.any_enabled()
    }

    /// Failures so far, by reason name.
    pub fn failure_counts(&self) -> Vec<(&'static str, u64)> {
        Reason::ALL
            .iter()
            .map(|r| {
                (
                    r.name(),
                    self.failures.counts[*r as usize].load(Ordering::Relaxed),
                )
            })
            .collect()
    }

    /// Checks `req` from address `ip` on a broker.
    pub fn check(&self, ip: Option<IpAddr>, req: &RemotingCommand) -> Result<(), Refusal> {
        if !self.enabled() {
            return Ok(());
        }
        if self.settings.acl_enable
            && let Some(plain) = &self.plain
            && let Err(msg) = crate::plain_acl::validate(&plain.config(), req, ip)
        {
            let reason = plain_reason(&msg);
            return Err(self.refuse(
                ip,
                req,
                reason,
                response::SYSTEM_ERROR,
                format!("org.apache.rocketmq.acl.common.AclException: {msg}"),
            ));
        }
        self.check_v2(ip, req)
            .map_err(|(reason, msg)| self.refuse(ip, req, reason, response::NO_PERMISSION, msg))
    }

    /// Checks `req` on a NameServer: its writes need a super user (one the
    /// settings name) when authentication is on; reads pass.
    pub fn check_namesrv(&self, ip: Option<IpAddr>, req: &RemotingCommand) -> Result<(), Refusal> {
        if !self.settings.authentication_enabled
            || !request_map::is_namesrv_write(req.code)
            || self.settings.authentication_whitelist.contains(&req.code)
        {
            return Ok(());
        }
        let verdict = match req.ext_fields.get(ACCESS_KEY) {
            None => Err((
                Reason::NoCredentials,
                "username cannot be null.".to_string(),
            )),
            Some(ak) => match self.settings.config_users().find(|u| u.username == ak) {
                None => Err((
                    Reason::UnknownUser,
                    format!("User:{ak} is not a super user of this NameServer."),
                )),
                Some(u) if !sign::verify(req, &u.password) => {
                    Err((Reason::BadSignature, "check signature failed.".to_string()))
                }
                Some(_) => Ok(()),
            },
        };
        verdict.map_err(|(reason, msg)| self.refuse(ip, req, reason, response::NO_PERMISSION, msg))
    }

    /// The check of Basalt's AUTH_METADATA_SYNC (its answer holds every
    /// password), whatever the switches and whitelists say: the request
    /// must be signed by an enabled super user of this broker's store.
    /// A store without users passes: there is nothing to protect, and the
    /// answer is empty.
    pub fn check_sync(&self, ip: Option<IpAddr>, req: &RemotingCommand) -> Result<(), Refusal> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let snap = store.snapshot();
        if snap.users.is_empty() && snap.acls.is_empty() {
            return Ok(());
        }
        let verdict = match req.ext_fields.get(ACCESS_KEY).filter(|a| !a.is_empty()) {
            None => Err((
                Reason::NoCredentials,
                "username cannot be null.".to_string(),
            )),
            Some(ak) => match snap.users.get(ak) {
                None => Err((Reason::UnknownUser, format!("User:{ak} is not found."))),
                Some(u) if u.status == UserStatus::Disable => {
                    Err((Reason::DisabledUser, format!("User:{ak} is disabled.")))
                }
                Some(u) if !sign::verify(req, &u.password) => {
                    Err((Reason::BadSignature, "check signature failed.".to_string()))
                }
                Some(u) if u.user_type != UserType::Super => Err((
                    Reason::Denied,
                    format!("User:{ak} is not a super user: only a super user may copy users."),
                )),
                Some(_) => Ok(()),
            },
        };
        verdict.map_err(|(reason, msg)| self.refuse(ip, req, reason, response::NO_PERMISSION, msg))
    }

    fn check_v2(&self, ip: Option<IpAddr>, req: &RemotingCommand) -> Result<(), (Reason, String)> {
        let s = &self.settings;
        let authn = s.authentication_enabled && !s.authentication_whitelist.contains(&req.code);
        let authz = s.authorization_enabled && !s.authorization_whitelist.contains(&req.code);
        if !authn && !authz {
            return Ok(());
        }
        let snap = self
            .store
            .as_ref()
            .map(|st| st.snapshot())
            .unwrap_or_default();
        let ak = req.ext_fields.get(ACCESS_KEY).filter(|a| !a.is_empty());
        let user = ak.and_then(|a| snap.users.get(a));
        if authn {
            let ak = ak.ok_or((
                Reason::NoCredentials,
                "username cannot be null.".to_string(),
            ))?;
            let user =
                user.ok_or_else(|| (Reason::UnknownUser, format!("User:{ak} is not found.")))?;
            if user.status == UserStatus::Disable {
                return Err((Reason::DisabledUser, format!("User:{ak} is disabled.")));
            }
            if !sign::verify(req, &user.password) {
                return Err((Reason::BadSignature, "check signature failed.".to_string()));
            }
        }
        if !authz {
            return Ok(());
        }
        // With authentication off, Java trusts the AccessKey as the subject.
        let name = ak.unwrap_or("null");
        let user = user.ok_or_else(|| (Reason::UnknownUser, format!("User:{name} not found.")))?;
        if user.status == UserStatus::Disable {
            return Err((Reason::DisabledUser, format!("User:{name} is disabled.")));
        }
        if user.user_type == UserType::Super {
            return Ok(());
        }
        let needs = request_map::needs(req, &self.cluster).map_err(|e| {
            (
                Reason::BadRequest,
                format!("parse authorization context error: {e}"),
            )
        })?;
        let acl = snap.acls.get(&format!("User:{name}"));
        for need in &needs {
            if let Err(detail) = evaluate::decide(acl, need, ip) {
                let actions: Vec<&str> = need.actions.iter().map(|a| a.name()).collect();
                return Err((
                    Reason::Denied,
                    format!(
                        "User:{name} has no permission to access {} ({}) from {}, {detail}",
                        need.resource.key(),
                        actions.join(","),
                        ip.map_or("unknown".to_string(), |i| i.to_string()),
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Counts the failure, logs it at a bounded rate, builds the refusal.
    fn refuse(
        &self,
        ip: Option<IpAddr>,
        req: &RemotingCommand,
        reason: Reason,
        code: i32,
        remark: String,
    ) -> Refusal {
        self.refuse_rpc(ip, &req.code.to_string(), reason, code, remark)
    }

    /// [`AuthGate::refuse`] for any protocol: `rpc` names the request in
    /// the log line (a remoting code, a gRPC method), `code` is the
    /// answer's code.
    pub(crate) fn refuse_rpc(
        &self,
        ip: Option<IpAddr>,
        rpc: &str,
        reason: Reason,
        code: i32,
        remark: String,
    ) -> Refusal {
        self.failures.counts[reason as usize].fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let suppressed = {
            let mut t = self.failures.last_logged.lock();
            if t.len() >= LOG_TABLE_MAX && !t.contains_key(&ip) {
                t.clear();
            }
            let e = t.entry(ip).or_insert((None, 0));
            if e.0.is_none_or(|at| now.duration_since(at) >= LOG_EVERY) {
                let n = e.1;
                *e = (Some(now), 0);
                Some(n)
            } else {
                e.1 += 1;
                None
            }
        };
        if let Some(suppressed) = suppressed {
            // The remark names user, resource and action; never a secret.
            tracing::warn!(
                remote = ?ip,
                code = rpc,
                reason = reason.name(),
                suppressed,
                "request refused: {remark}"
            );
        }
        Refusal {
            code,
            remark,
            reason: reason.name(),
        }
    }
}

fn plain_reason(msg: &str) -> Reason {
    if msg.starts_with("No accessKey") {
        Reason::NoCredentials
    } else if msg.starts_with("No acl config") {
        Reason::UnknownUser
    } else if msg.starts_with("Check signature") {
        Reason::BadSignature
    } else {
        Reason::Denied
    }
}
