//! The dashboard's view of the ACL 2.0 users (never a password) and ACLs,
//! and the check its write actions pass: with `authenticationEnabled`, HTTP
//! Basic credentials of a super user, verified against the broker's users
//! in constant time (`AuthGate::check_basic_super`). Both serve over TLS
//! when the dashboard does (`tls.server.mode`); without it Basic
//! credentials cross the network in clear.

use basalt_auth::model::{Acl, UserInfo};

use crate::broker::Broker;
use crate::http_serve::{HttpReply, HttpRequest};

/// With authentication on: the super user whose credentials `r` carries,
/// or the 401 to answer. With it off: Ok(None), anyone may (as the admin
/// codes answer anyone then).
pub(super) fn require_super(broker: &Broker, r: &HttpRequest) -> Result<Option<String>, HttpReply> {
    let gate = broker.auth_gate();
    if !gate.settings().authentication_enabled {
        return Ok(None);
    }
    match gate.check_basic_super(r.remote, r.authorization.as_deref()) {
        Ok(user) => Ok(Some(user)),
        Err(refusal) => {
            broker.record_auth_failure(refusal.reason);
            Err(HttpReply::unauthorized(refusal.remark))
        }
    }
}

/// `GET /api/auth`: the switches, users without passwords, ACLs. Needs a
/// super user when authentication is on.
pub(super) fn view(broker: &Broker, r: &HttpRequest) -> HttpReply {
    if let Err(refused) = require_super(broker, r) {
        return refused;
    }
    let gate = broker.auth_gate();
    let s = gate.settings();
    let snap = gate.store().map(|st| st.snapshot()).unwrap_or_default();
    let users: Vec<UserInfo> = snap.users.values().map(|u| u.info(false)).collect();
    let acls: Vec<_> = snap.acls.values().map(Acl::info).collect();
    HttpReply::json(&serde_json::json!({
        "authenticationEnabled": s.authentication_enabled,
        "authorizationEnabled": s.authorization_enabled,
        "aclEnable": s.acl_enable,
        "users": users,
        "acls": acls,
    }))
}
