//! Remoting request signatures as RocketMQ clients compute them
//! (`AclClientRPCHook`, `AclUtils.combineRequestContent`, `AclSigner`):
//! HmacSHA1, keyed with the secret's UTF-8 bytes, over the values of every
//! ext field except `Signature`, in key order, concatenated, followed by the
//! body; the result is standard base64.

use basalt_remoting::RemotingCommand;
use base64::Engine;
use hmac::{KeyInit, Mac};
use subtle::ConstantTimeEq;

/// The ext field naming the user (ACL 2.0) or account (ACL 1.0).
pub const ACCESS_KEY: &str = "AccessKey";
/// The ext field carrying the signature.
pub const SIGNATURE: &str = "Signature";
/// The optional ext field of temporary credentials; it is signed like any
/// other field.
pub const SECURITY_TOKEN: &str = "SecurityToken";
/// `MixAll.UNIQUE_MSG_QUERY_FLAG`: clients up to 4.9.3 left it out of the
/// signed content.
const UNIQUE_MSG_QUERY_FLAG: &str = "_UNIQUE_KEY_QUERY";
/// `MQVersion.Version.V4_9_3.ordinal()`.
const V4_9_3: i32 = 400;

type HmacSha1 = hmac::Hmac<sha1::Sha1>;

/// The base64 HmacSHA1 of `data` under `secret`.
pub fn signature(data: &[u8], secret: &str) -> String {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = match HmacSha1::new_from_slice(secret.as_bytes()) {
        Ok(m) => m,
        Err(_) => unreachable!("HMAC takes keys of any length"),
    };
    mac.update(data);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// Java's `String.compareTo`: UTF-16 code unit order (TreeMap's order).
fn java_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// The bytes a client signs for `req`: sorted field values (without
/// `Signature`, and without `skip` when given) then the body.
fn content_skipping(req: &RemotingCommand, skip: Option<&str>) -> Vec<u8> {
    let mut fields: Vec<(&str, &str)> = req
        .ext_fields
        .iter()
        .filter(|(k, _)| *k != SIGNATURE && Some(*k) != skip)
        .collect();
    fields.sort_by(|a, b| java_order(a.0, b.0));
    let body_len = req.body.len() + req.body_parts.iter().map(|b| b.len()).sum::<usize>();
    let mut out = Vec::with_capacity(fields.iter().map(|f| f.1.len()).sum::<usize>() + body_len);
    for (_, v) in fields {
        out.extend_from_slice(v.as_bytes());
    }
    out.extend_from_slice(&req.body);
    for part in &req.body_parts {
        out.extend_from_slice(part);
    }
    out
}

/// The signed content of `req` as a current client computes it.
pub fn content(req: &RemotingCommand) -> Vec<u8> {
    content_skipping(req, None)
}

/// Constant-time equality of two signatures (the length is not secret).
pub fn same(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// Whether `req` carries a valid signature under `secret`.
///
/// As the 5.3 broker does, `_UNIQUE_KEY_QUERY` is left out of the content
/// for clients at 4.9.3 or older. A 4.9.4–4.9.8 client also left it out
/// while 5.x clients sign it, so when the field is present and the first
/// check fails, the content without it is tried too.
pub fn verify(req: &RemotingCommand, secret: &str) -> bool {
    let Some(given) = req.ext_fields.get(SIGNATURE) else {
        return false;
    };
    let old_client = req.version <= V4_9_3;
    let skip = old_client.then_some(UNIQUE_MSG_QUERY_FLAG);
    if same(&signature(&content_skipping(req, skip), secret), given) {
        return true;
    }
    !old_client
        && req.ext_fields.contains_key(UNIQUE_MSG_QUERY_FLAG)
        && same(
            &signature(&content_skipping(req, Some(UNIQUE_MSG_QUERY_FLAG)), secret),
            given,
        )
}

/// Signs `req` in place as `AclClientRPCHook` does: adds `AccessKey` (and
/// `SecurityToken` when given), then `Signature` over everything else.
pub fn sign(req: &mut RemotingCommand, access_key: &str, secret: &str, token: Option<&str>) {
    req.ext_fields.remove(SIGNATURE);
    req.ext_fields.insert(ACCESS_KEY, access_key);
    if let Some(t) = token {
        req.ext_fields.insert(SECURITY_TOKEN, t);
    }
    let sig = signature(&content(req), secret);
    req.ext_fields.insert(SIGNATURE, sig);
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_remoting::ExtFields;

    fn req() -> RemotingCommand {
        let mut ext = ExtFields::new();
        ext.insert("topic", "TopicA");
        ext.insert("b", "x");
        ext.insert("a", "g");
        RemotingCommand::request(10)
            .with_ext(ext)
            .with_body(b"hello".to_vec())
    }

    #[test]
    fn content_is_sorted_values_then_body() {
        let mut r = req();
        r.ext_fields.insert(ACCESS_KEY, "ak");
        // Keys in Java order: AccessKey, a, b, topic.
        assert_eq!(content(&r), b"akgxTopicAhello".to_vec());
    }

    #[test]
    fn known_hmac_sha1_vector() {
        // RFC 2202 test case 2.
        assert_eq!(
            signature(b"what do ya want for nothing?", "Jefe"),
            base64::engine::general_purpose::STANDARD
                .encode(hex("effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"))
        );
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn signed_request_verifies_and_any_change_fails() {
        let mut r = req();
        sign(&mut r, "ak", "secret", None);
        assert!(verify(&r, "secret"));
        assert!(!verify(&r, "other"));
        let mut changed = r.clone();
        changed.ext_fields.insert("topic", "TopicB");
        assert!(!verify(&changed, "secret"));
        let mut added = r.clone();
        added.ext_fields.insert("extra", "1");
        assert!(!verify(&added, "secret"));
        let body = r.clone().with_body(b"hellO".to_vec());
        assert!(!verify(&body, "secret"));
        let mut unsigned = r.clone();
        unsigned.ext_fields.remove(SIGNATURE);
        assert!(!verify(&unsigned, "secret"));
    }

    #[test]
    fn unique_key_flag_signed_or_not() {
        let mut r = req();
        r.ext_fields.insert(UNIQUE_MSG_QUERY_FLAG, "true");
        sign(&mut r, "ak", "s", None);
        assert!(verify(&r, "s"));
        // A 4.9.4+ client that left the flag out of what it signed.
        let mut old = req();
        sign(&mut old, "ak", "s", None);
        old.ext_fields.insert(UNIQUE_MSG_QUERY_FLAG, "true");
        assert!(verify(&old, "s"));
    }
}
