//! HTTP Basic credentials (`Authorization: Basic base64(user:password)`)
//! checked against the ACL 2.0 users: the broker's dashboard asks them of
//! its write actions and of its users view when authentication is on.

use std::net::IpAddr;

use base64::Engine;

use crate::gate::{AuthGate, Reason, Refusal};
use crate::model::{UserStatus, UserType};
use crate::sign;

/// The HTTP status of a refusal: 401, so a browser asks for credentials.
pub const UNAUTHORIZED: i32 = 401;

/// `user:password` from an `Authorization` header value, if it is Basic.
fn decode(header: &str) -> Option<(String, String)> {
    let (scheme, rest) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD
        .decode(rest.trim())
        .ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (u, p) = text.split_once(':')?;
    Some((u.to_string(), p.to_string()))
}

/// Whether two passwords are equal, in time independent of where they
/// differ and of their lengths: their HMACs (fixed length) are compared in
/// constant time.
fn same_password(given: &str, stored: &str) -> bool {
    const PROBE: &[u8] = b"basalt-dashboard-basic-credentials";
    sign::same(
        &sign::signature(PROBE, given),
        &sign::signature(PROBE, stored),
    )
}

impl AuthGate {
    /// Checks HTTP Basic credentials: an enabled super user of the store
    /// with its password. Ok(the user name). A refusal is counted and
    /// logged at a bounded rate like the remoting ones (never the
    /// password); its code is [`UNAUTHORIZED`].
    pub fn check_basic_super(
        &self,
        ip: Option<IpAddr>,
        header: Option<&str>,
    ) -> Result<String, Refusal> {
        self.basic_verdict(header)
            .map_err(|(reason, msg)| self.refuse_rpc(ip, "dashboard", reason, UNAUTHORIZED, msg))
    }

    fn basic_verdict(&self, header: Option<&str>) -> Result<String, (Reason, String)> {
        let (name, password) = header.and_then(decode).ok_or((
            Reason::NoCredentials,
            "HTTP Basic credentials of a super user are required.".to_string(),
        ))?;
        let user = self.store().and_then(|s| s.user(&name));
        // Compare even for an unknown user, so the answer takes as long.
        let stored = user.as_ref().map_or("", |u| u.password.as_str());
        let matches = same_password(&password, stored);
        let Some(user) = user else {
            return Err((Reason::UnknownUser, format!("User:{name} is not found.")));
        };
        if !matches {
            return Err((Reason::BadSignature, "wrong password.".to_string()));
        }
        if user.status == UserStatus::Disable {
            return Err((Reason::DisabledUser, format!("User:{name} is disabled.")));
        }
        if user.user_type != UserType::Super {
            return Err((Reason::Denied, format!("User:{name} is not a super user.")));
        }
        Ok(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::User;
    use crate::settings::AuthSettings;
    use crate::store::{AuthStore, Persist};
    use std::sync::Arc;

    struct Mem;
    impl Persist for Mem {
        fn load(&self) -> Option<String> {
            None
        }
        fn save(&self, _: &str) -> Result<(), String> {
            Ok(())
        }
    }

    fn basic(u: &str, p: &str) -> String {
        let b = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
        format!("Basic {b}")
    }

    #[test]
    fn only_a_super_user_with_its_password_passes() {
        let store = AuthStore::open(Box::new(Mem), Box::new(Mem)).unwrap();
        for (name, t) in [("root", UserType::Super), ("bob", UserType::Normal)] {
            store
                .ensure_user(User {
                    username: name.into(),
                    password: format!("{name}-pw"),
                    user_type: t,
                    status: UserStatus::Enable,
                })
                .unwrap();
        }
        let gate = AuthGate::new(AuthSettings::default(), "c", Some(Arc::new(store)), None);
        let check = |h: Option<&str>| gate.check_basic_super(None, h);
        assert_eq!(check(Some(&basic("root", "root-pw"))).unwrap(), "root");
        let refusals = [
            (None, "no_credentials"),
            (Some("Bearer x".to_string()), "no_credentials"),
            (Some("Basic !!!".to_string()), "no_credentials"),
            (Some(basic("root", "root-pX")), "bad_signature"),
            (Some(basic("root", "root-pw-longer")), "bad_signature"),
            (Some(basic("bob", "bob-pw")), "denied"),
            (Some(basic("eve", "root-pw")), "unknown_user"),
        ];
        for (h, reason) in refusals {
            let r = check(h.as_deref()).unwrap_err();
            assert_eq!((r.code, r.reason), (UNAUTHORIZED, reason), "{h:?}");
            assert!(!r.remark.contains("-pw"));
        }
    }
}
