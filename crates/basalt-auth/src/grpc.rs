//! The check of a gRPC (5.x SDK) call, as RocketMQ's proxy makes it
//! (`DefaultAuthenticationContextBuilder` / `DefaultAuthorizationContextBuilder`
//! for gRPC metadata):
//!
//! * authentication: the SDK sends `x-mq-date-time` (`yyyyMMdd'T'HHmmss'Z'`)
//!   and `authorization: MQv2-HMAC-SHA1 Credential=<user>,
//!   SignedHeaders=x-mq-date-time, Signature=<hex>`, the signature being the
//!   HmacSHA1 of the date-time text keyed with the user's password (both
//!   UTF-8), in hex (the Java SDK writes upper case; either case is read);
//! * authorization: the resources and actions of [`GrpcCall`], decided by
//!   the same ACL 2.0 policies as remoting requests.
//!
//! A call that passes gets a [`GrpcIdentity`], which signs the remoting
//! commands the gRPC layer hands to the broker's processor on the caller's
//! behalf, so those go through the remoting check as that user.

use std::net::IpAddr;

use basalt_remoting::RemotingCommand;
use hmac::{KeyInit, Mac};
use subtle::ConstantTimeEq;

use crate::evaluate;
use crate::gate::{AuthGate, Reason};
use crate::model::{Action, Resource, ResourceType, UserStatus, UserType};
use crate::request_map::Need;

/// The header carrying the credential and signature.
pub const AUTHORIZATION: &str = "authorization";
/// The signed header: the client's clock at signing.
pub const DATE_TIME: &str = "x-mq-date-time";
/// The signing scheme the SDKs name.
pub const ALGORITHM: &str = "MQv2-HMAC-SHA1";

/// What a refused gRPC call is answered with: the 5.x `Code` UNAUTHORIZED
/// (40100, a failed authentication) or FORBIDDEN (40300, a denied action).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GrpcRefusalKind {
    Unauthorized,
    Forbidden,
}

/// A refused call: the kind, the message, the reason counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrpcRefusal {
    pub kind: GrpcRefusalKind,
    pub message: String,
    /// As `basalt_auth_failures_total` labels it.
    pub reason: &'static str,
}

/// What a gRPC call touches, as the proxy's authorization builder reads
/// each request; each listed resource needs one of the actions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrpcCall<'a> {
    /// SendMessage (the first message's topic) and EndTransaction: PUB.
    Publish { topic: &'a str },
    /// ReceiveMessage, AckMessage, ForwardMessageToDeadLetterQueue,
    /// QueryAssignment: SUB on the group and SUB on the topic.
    Consume { group: &'a str, topic: &'a str },
    /// ChangeInvisibleDuration, NotifyClientTermination and a consumer's
    /// Heartbeat: SUB on the group.
    Group { group: &'a str },
    /// QueryRoute: PUB or SUB on the topic.
    Route { topic: &'a str },
    /// Telemetry settings: PUB on each published topic; SUB on the group
    /// and on each subscribed topic.
    Settings {
        publish: Vec<&'a str>,
        group: Option<&'a str>,
        subscribe: Vec<&'a str>,
    },
    /// Authenticated only (a producer's Heartbeat, other telemetry).
    Unscoped,
}

impl GrpcCall<'_> {
    /// The resources and actions the call needs; an empty name is an error
    /// (`topic is null`, `group is null`).
    fn needs(&self) -> Result<Vec<Need>, String> {
        let topic = |n: &str, a: &[Action]| named(ResourceType::Topic, n, a, "topic is null");
        let group = |n: &str| named(ResourceType::Group, n, &[Action::Sub], "group is null");
        Ok(match self {
            GrpcCall::Publish { topic: t } => vec![topic(t, &[Action::Pub])?],
            GrpcCall::Consume { group: g, topic: t } => {
                vec![group(g)?, topic(t, &[Action::Sub])?]
            }
            GrpcCall::Group { group: g } => vec![group(g)?],
            GrpcCall::Route { topic: t } => vec![topic(t, &[Action::Pub, Action::Sub])?],
            GrpcCall::Settings {
                publish,
                group: g,
                subscribe,
            } => {
                let mut out = Vec::new();
                for t in publish {
                    out.push(topic(t, &[Action::Pub])?);
                }
                if let Some(g) = g {
                    out.push(group(g)?);
                }
                for t in subscribe {
                    out.push(topic(t, &[Action::Sub])?);
                }
                out
            }
            GrpcCall::Unscoped => Vec::new(),
        })
    }
}

fn named(kind: ResourceType, name: &str, actions: &[Action], err: &str) -> Result<Need, String> {
    if name.trim().is_empty() {
        return Err(err.to_string());
    }
    Ok(Need {
        resource: Resource::of(kind, name),
        actions: actions.to_vec(),
    })
}

/// Who a checked gRPC call acts as. Invariant: `secret` is the password of
/// `username` as the store held it when the call was checked (or none when
/// no check is on). Debug output never shows the secret.
#[derive(Clone, Default)]
pub struct GrpcIdentity {
    username: Option<String>,
    secret: Option<String>,
}

impl std::fmt::Debug for GrpcIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcIdentity")
            .field("username", &self.username)
            .finish()
    }
}

impl GrpcIdentity {
    pub fn username(&self) -> Option<&str> {
        self.username.as_deref()
    }

    /// Signs a remoting command made on this caller's behalf, as a
    /// remoting client of this user would (`AccessKey`, `Signature`), so
    /// the broker's own check applies to it. Without an identity the
    /// command is left unsigned (and refused when checks are on).
    pub fn sign(&self, cmd: &mut RemotingCommand) {
        if let Some(user) = &self.username {
            crate::sign::sign(cmd, user, self.secret.as_deref().unwrap_or(""), None);
        }
    }
}

/// The credential of a call, read from its headers.
#[derive(Debug, PartialEq, Eq)]
pub struct Credential {
    pub username: String,
    /// The signature's bytes (decoded from hex); None when absent or not
    /// hex.
    pub signature: Option<Vec<u8>>,
}

/// Reads `authorization` as the proxy does: the scheme, then
/// comma-separated `key=value` items; `Credential`'s value up to the first
/// `/` is the user, `Signature` is hex.
pub fn parse_authorization(header: &str) -> Result<Credential, String> {
    let (_scheme, items) = header
        .split_once(' ')
        .ok_or("authentication header is incorrect")?;
    let mut username = None;
    let mut signature = None;
    for item in items.split(',') {
        let (k, v) = item
            .trim()
            .split_once('=')
            .ok_or("authentication keyValues length is incorrect")?;
        match k {
            "Credential" => username = v.split('/').next().map(str::to_string),
            "Signature" => signature = decode_hex(v),
            _ => {}
        }
    }
    let username = username
        .filter(|u| !u.is_empty())
        .ok_or("username cannot be null.")?;
    Ok(Credential {
        username,
        signature,
    })
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// The HmacSHA1 of `date_time` under `secret`, as the SDK signs it.
pub fn date_time_mac(secret: &str, date_time: &str) -> Vec<u8> {
    let mut mac = match hmac::Hmac::<sha1::Sha1>::new_from_slice(secret.as_bytes()) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC takes keys of any length"),
    };
    mac.update(date_time.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// Whether `credential` carries a valid signature of `date_time` under
/// `secret` (compared in constant time).
pub fn verify(credential: &Credential, date_time: &str, secret: &str) -> bool {
    match &credential.signature {
        Some(given) => bool::from(given.ct_eq(&date_time_mac(secret, date_time))),
        None => false,
    }
}

impl AuthGate {
    /// Checks one gRPC call (`rpc` names it in logs) from `ip` with its `authorization` and
    /// `x-mq-date-time` headers. With every check off it passes with no
    /// identity. ACL 1.0 (`aclEnable`) has no gRPC form: with it on, gRPC
    /// calls are refused rather than let through unchecked.
    pub fn check_grpc(
        &self,
        rpc: &str,
        ip: Option<IpAddr>,
        authorization: Option<&str>,
        date_time: Option<&str>,
        call: &GrpcCall<'_>,
    ) -> Result<GrpcIdentity, GrpcRefusal> {
        if !self.enabled() {
            return Ok(GrpcIdentity::default());
        }
        self.grpc_verdict(ip, authorization, date_time, call)
            .map_err(|(kind, reason, message)| {
                let r = self.refuse_rpc(ip, rpc, reason, 0, message);
                GrpcRefusal {
                    kind,
                    message: r.remark,
                    reason: r.reason,
                }
            })
    }

    fn grpc_verdict(
        &self,
        ip: Option<IpAddr>,
        authorization: Option<&str>,
        date_time: Option<&str>,
        call: &GrpcCall<'_>,
    ) -> Result<GrpcIdentity, (GrpcRefusalKind, Reason, String)> {
        use GrpcRefusalKind::{Forbidden, Unauthorized};
        let s = self.settings();
        if s.acl_enable {
            return Err((
                Unauthorized,
                Reason::Denied,
                "ACL 1.0 (aclEnable) does not cover gRPC clients; use ACL 2.0 users".into(),
            ));
        }
        let authn = s.authentication_enabled;
        let authz = s.authorization_enabled;
        let snap = self.store().map(|st| st.snapshot()).unwrap_or_default();
        let header = authorization.filter(|a| !a.trim().is_empty());
        let credential = match header.map(parse_authorization) {
            Some(Ok(c)) => Some(c),
            Some(Err(e)) if authn => return Err((Unauthorized, Reason::BadSignature, e)),
            _ => None,
        };
        let user = credential
            .as_ref()
            .and_then(|c| snap.users.get(&c.username));
        if authn {
            let c = credential.as_ref().ok_or((
                Unauthorized,
                Reason::NoCredentials,
                "authentication header is null".to_string(),
            ))?;
            let dt = date_time.filter(|d| !d.is_empty()).ok_or((
                Unauthorized,
                Reason::BadSignature,
                "datetime is null".to_string(),
            ))?;
            let u = user.ok_or_else(|| {
                let m = format!("User:{} is not found.", c.username);
                (Unauthorized, Reason::UnknownUser, m)
            })?;
            if u.status == UserStatus::Disable {
                let m = format!("User:{} is disabled.", c.username);
                return Err((Unauthorized, Reason::DisabledUser, m));
            }
            if !verify(c, dt, &u.password) {
                let m = "check signature failed.".to_string();
                return Err((Unauthorized, Reason::BadSignature, m));
            }
        }
        let identity = GrpcIdentity {
            username: credential.as_ref().map(|c| c.username.clone()),
            secret: user.map(|u| u.password.clone()),
        };
        if !authz {
            return Ok(identity);
        }
        let name = identity.username.clone().unwrap_or_else(|| "null".into());
        let u = user.ok_or_else(|| {
            let m = format!("User:{name} not found.");
            (Forbidden, Reason::UnknownUser, m)
        })?;
        if u.status == UserStatus::Disable {
            let m = format!("User:{name} is disabled.");
            return Err((Forbidden, Reason::DisabledUser, m));
        }
        if u.user_type == UserType::Super {
            return Ok(identity);
        }
        let needs = call
            .needs()
            .map_err(|e| (Forbidden, Reason::BadRequest, e))?;
        let acl = snap.acls.get(&format!("User:{name}"));
        for need in &needs {
            if let Err(detail) = evaluate::decide(acl, need, ip) {
                let actions: Vec<&str> = need.actions.iter().map(|a| a.name()).collect();
                let m = format!(
                    "User:{name} has no permission to access {} ({}) from {}, {detail}",
                    need.resource.key(),
                    actions.join(","),
                    ip.map_or("unknown".to_string(), |i| i.to_string()),
                );
                return Err((Forbidden, Reason::Denied, m));
            }
        }
        Ok(identity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DT: &str = "20261204T171600Z";

    fn header(user: &str, sig: &[u8]) -> String {
        let hex: String = sig.iter().map(|b| format!("{b:02X}")).collect();
        format!("{ALGORITHM} Credential={user}, SignedHeaders={DATE_TIME}, Signature={hex}")
    }

    #[test]
    fn signature_of_the_date_time_verifies() {
        let good = header("alice", &date_time_mac("alice-secret", DT));
        let c = parse_authorization(&good).expect("parses");
        assert_eq!(c.username, "alice");
        assert!(verify(&c, DT, "alice-secret"));
        // Lower-case hex reads the same.
        let hex: String = date_time_mac("alice-secret", DT)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let lower = format!("{ALGORITHM} Credential=alice, Signature={hex}");
        assert!(verify(
            &parse_authorization(&lower).unwrap(),
            DT,
            "alice-secret"
        ));
    }

    #[test]
    fn forged_signatures_fail() {
        // Signed with a guessed secret.
        let forged = parse_authorization(&header("alice", &date_time_mac("guess", DT))).unwrap();
        assert!(!verify(&forged, DT, "alice-secret"));
        // A valid signature replayed with another date-time header.
        let good =
            parse_authorization(&header("alice", &date_time_mac("alice-secret", DT))).unwrap();
        assert!(!verify(&good, "20261204T171601Z", "alice-secret"));
        // One bit flipped.
        let mut mac = date_time_mac("alice-secret", DT);
        mac[0] ^= 1;
        let flipped = parse_authorization(&header("alice", &mac)).unwrap();
        assert!(!verify(&flipped, DT, "alice-secret"));
        // Not hex, or no signature at all.
        let junk = format!("{ALGORITHM} Credential=alice, SignedHeaders={DATE_TIME}, Signature=zz");
        assert!(!verify(
            &parse_authorization(&junk).unwrap(),
            DT,
            "alice-secret"
        ));
        let none = format!("{ALGORITHM} Credential=alice, SignedHeaders={DATE_TIME}");
        assert!(!verify(
            &parse_authorization(&none).unwrap(),
            DT,
            "alice-secret"
        ));
    }

    #[test]
    fn malformed_headers_are_errors() {
        assert!(parse_authorization("MQv2-HMAC-SHA1").is_err());
        assert!(parse_authorization("MQv2-HMAC-SHA1 Credential").is_err());
        assert!(parse_authorization("MQv2-HMAC-SHA1 Signature=00").is_err());
        let c = parse_authorization("MQv2-HMAC-SHA1 Credential=bob/extra, Signature=00").unwrap();
        assert_eq!(c.username, "bob");
    }

    #[test]
    fn calls_need_what_the_proxy_checks() {
        let consume = GrpcCall::Consume {
            group: "G",
            topic: "T",
        };
        let needs = consume.needs().unwrap();
        assert_eq!(needs.len(), 2);
        assert_eq!(needs[0].resource.kind, ResourceType::Group);
        assert_eq!(needs[1].actions, vec![Action::Sub]);
        let route = GrpcCall::Route { topic: "T" }.needs().unwrap();
        assert_eq!(route[0].actions, vec![Action::Pub, Action::Sub]);
        assert!(GrpcCall::Publish { topic: "" }.needs().is_err());
        assert!(GrpcCall::Unscoped.needs().unwrap().is_empty());
    }

    /// A fixed document; saving is not expected.
    struct Doc(&'static str);

    impl crate::store::Persist for Doc {
        fn load(&self) -> Option<String> {
            Some(self.0.to_string())
        }
        fn save(&self, _: &str) -> Result<(), String> {
            Err("read-only".into())
        }
    }

    const USERS: &str = r#"[
        {"username":"alice","password":"alice-secret","userType":"Normal"},
        {"username":"off","password":"off-secret","userType":"Normal","userStatus":"disable"}
    ]"#;
    const ACLS: &str = r#"[{"subject":"User:alice","policies":[{"policyType":"Custom","entries":[
        {"resource":"Topic:T","actions":["Pub","Sub"],"decision":"Allow"},
        {"resource":"Group:G","actions":["Sub"],"decision":"Allow"}]}]}]"#;

    fn gate(authn: bool, authz: bool) -> AuthGate {
        let store = crate::store::AuthStore::open(Box::new(Doc(USERS)), Box::new(Doc(ACLS)))
            .expect("store");
        let settings = crate::settings::AuthSettings {
            authentication_enabled: authn,
            authorization_enabled: authz,
            ..Default::default()
        };
        AuthGate::new(settings, "C", Some(std::sync::Arc::new(store)), None)
    }

    fn signed(user: &str, secret: &str) -> String {
        header(user, &date_time_mac(secret, DT))
    }

    #[test]
    fn the_gate_refuses_forged_unknown_missing_and_denied_calls() {
        use GrpcRefusalKind::{Forbidden, Unauthorized};
        let g = gate(true, true);
        let ip = Some(IpAddr::from([127, 0, 0, 1]));
        let publish = GrpcCall::Publish { topic: "T" };
        let check = |auth: Option<&str>, date: Option<&str>, call: &GrpcCall<'_>| {
            g.check_grpc("SendMessage", ip, auth, date, call)
        };
        let good = signed("alice", "alice-secret");
        let id = check(Some(&good), Some(DT), &publish).expect("alice may publish to T");
        assert_eq!(id.username(), Some("alice"));
        let refused = |r: Result<GrpcIdentity, GrpcRefusal>| r.expect_err("must be refused");
        let r = refused(check(Some(&signed("alice", "guess")), Some(DT), &publish));
        assert_eq!((r.kind, r.reason), (Unauthorized, "bad_signature"));
        let r = refused(check(Some(&good), Some("20261204T171601Z"), &publish));
        assert_eq!((r.kind, r.reason), (Unauthorized, "bad_signature"));
        let r = refused(check(Some(&good), None, &publish));
        assert_eq!(r.kind, Unauthorized);
        let r = refused(check(Some(&signed("mallory", "x")), Some(DT), &publish));
        assert_eq!((r.kind, r.reason), (Unauthorized, "unknown_user"));
        let r = refused(check(None, Some(DT), &publish));
        assert_eq!((r.kind, r.reason), (Unauthorized, "no_credentials"));
        let r = refused(check(
            Some(&signed("off", "off-secret")),
            Some(DT),
            &publish,
        ));
        assert_eq!((r.kind, r.reason), (Unauthorized, "disabled_user"));
        let other = GrpcCall::Publish { topic: "U" };
        let r = refused(check(Some(&good), Some(DT), &other));
        assert_eq!((r.kind, r.reason), (Forbidden, "denied"));
        assert!(r.message.contains("Topic:U"), "{}", r.message);
        let consume = GrpcCall::Consume {
            group: "G",
            topic: "T",
        };
        assert!(check(Some(&good), Some(DT), &consume).is_ok());
        let wrong_group = GrpcCall::Consume {
            group: "H",
            topic: "T",
        };
        assert_eq!(
            refused(check(Some(&good), Some(DT), &wrong_group)).kind,
            Forbidden
        );
        let counts: std::collections::HashMap<_, _> = g.failure_counts().into_iter().collect();
        assert_eq!(counts["bad_signature"], 3);
        assert_eq!(counts["unknown_user"], 1);
        assert_eq!(counts["no_credentials"], 1);
        assert_eq!(counts["disabled_user"], 1);
        assert_eq!(counts["denied"], 2);
    }

    #[test]
    fn the_identity_signs_remoting_commands_the_remoting_check_accepts() {
        let g = gate(true, true);
        let good = signed("alice", "alice-secret");
        let id = g
            .check_grpc(
                "SendMessage",
                None,
                Some(&good),
                Some(DT),
                &GrpcCall::Unscoped,
            )
            .expect("alice");
        let mut cmd = RemotingCommand::request(10);
        id.sign(&mut cmd);
        assert!(crate::sign::verify(&cmd, "alice-secret"));
        // No check on: no identity, nothing signed.
        let open = gate(false, false)
            .check_grpc("SendMessage", None, None, None, &GrpcCall::Unscoped)
            .expect("open");
        let mut cmd = RemotingCommand::request(10);
        open.sign(&mut cmd);
        assert!(cmd.ext_fields.get(crate::sign::SIGNATURE).is_none());
    }

    #[test]
    fn authorization_alone_trusts_the_named_user() {
        let g = gate(false, true);
        let unsigned = format!("{ALGORITHM} Credential=alice, SignedHeaders={DATE_TIME}");
        let publish = GrpcCall::Publish { topic: "T" };
        assert!(
            g.check_grpc("SendMessage", None, Some(&unsigned), None, &publish)
                .is_ok()
        );
        let r = g
            .check_grpc("SendMessage", None, None, None, &publish)
            .expect_err("no user named");
        assert_eq!(r.kind, GrpcRefusalKind::Forbidden);
    }
}
