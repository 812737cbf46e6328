//! The auth settings as broker.conf names them (Java `AuthConfig` and the
//! 4.x `aclEnable`).

use std::path::PathBuf;

use serde::Deserialize;

/// A user named in the settings (`initAuthenticationUser`,
/// `innerClientAuthenticationCredentials`); always a super user.
#[derive(Clone, PartialEq, Eq)]
pub struct ConfigUser {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for ConfigUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ConfigUser({})", self.username)
    }
}

/// Every auth setting. Invariant: the users parsed; whitelists hold codes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthSettings {
    /// `authenticationEnabled`: every request must be signed by a user.
    pub authentication_enabled: bool,
    /// `authorizationEnabled`: every request must be allowed by policy.
    pub authorization_enabled: bool,
    /// `aclEnable`: the 4.x plain ACL (plain_acl.yml) is checked.
    pub acl_enable: bool,
    /// `initAuthenticationUser`: `{"username":..,"password":..}`.
    pub init_user: Option<ConfigUser>,
    /// `innerClientAuthenticationCredentials`:
    /// `{"accessKey":..,"secretKey":..}`, the broker's own clients.
    pub inner_credentials: Option<ConfigUser>,
    /// `authenticationWhitelist`: request codes not authenticated.
    pub authentication_whitelist: Vec<i32>,
    /// `authorizationWhitelist`: request codes not authorized.
    pub authorization_whitelist: Vec<i32>,
    /// `aclPlainFile`: a plain ACL file read besides
    /// `$ROCKETMQ_HOME/conf/plain_acl.yml` and `conf/acl/*.yml`.
    pub acl_plain_file: Option<PathBuf>,
}

#[derive(Deserialize)]
struct InitUser {
    username: String,
    password: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Credentials {
    access_key: String,
    secret_key: String,
}

fn parse_bool(v: &str) -> Result<bool, String> {
    match v.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("expected true or false".into()),
    }
}

fn parse_codes(v: &str) -> Result<Vec<i32>, String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse()
                .map_err(|_| format!("{s:?} is not a request code"))
        })
        .collect()
}

fn non_blank(u: String, p: String) -> Result<Option<ConfigUser>, String> {
    if u.trim().is_empty() || p.is_empty() {
        return Err("the user name and password must not be blank".into());
    }
    Ok(Some(ConfigUser {
        username: u,
        password: p,
    }))
}

impl AuthSettings {
    /// Applies one broker.conf key; Ok(false) when the key is not an auth
    /// setting. Errors never quote the value (it may hold a secret).
    pub fn set(&mut self, key: &str, v: &str) -> Result<bool, String> {
        match key {
            "authenticationEnabled" => self.authentication_enabled = parse_bool(v)?,
            "authorizationEnabled" => self.authorization_enabled = parse_bool(v)?,
            "aclEnable" => self.acl_enable = parse_bool(v)?,
            "authenticationWhitelist" => self.authentication_whitelist = parse_codes(v)?,
            "authorizationWhitelist" => self.authorization_whitelist = parse_codes(v)?,
            "aclPlainFile" => {
                self.acl_plain_file =
                    Some(v.trim().into()).filter(|p: &PathBuf| !p.as_os_str().is_empty())
            }
            "initAuthenticationUser" => {
                self.init_user = if v.trim().is_empty() {
                    None
                } else {
                    let u: InitUser = serde_json::from_str(v)
                        .map_err(|_| "expected {\"username\":..,\"password\":..}".to_string())?;
                    non_blank(u.username, u.password)?
                }
            }
            "innerClientAuthenticationCredentials" => {
                self.inner_credentials = if v.trim().is_empty() {
                    None
                } else {
                    let c: Credentials = serde_json::from_str(v)
                        .map_err(|_| "expected {\"accessKey\":..,\"secretKey\":..}".to_string())?;
                    non_blank(c.access_key, c.secret_key)?
                }
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Whether any check is on.
    pub fn any_enabled(&self) -> bool {
        self.authentication_enabled || self.authorization_enabled || self.acl_enable
    }

    /// The super users the settings name.
    pub fn config_users(&self) -> impl Iterator<Item = &ConfigUser> {
        self.init_user.iter().chain(self.inner_credentials.iter())
    }

    /// The credentials the broker signs its own requests with (to a
    /// NameServer, to its master): `innerClientAuthenticationCredentials`
    /// as Java's broker signs, else the `initAuthenticationUser`.
    pub fn broker_credentials(&self) -> Option<&ConfigUser> {
        self.inner_credentials.as_ref().or(self.init_user.as_ref())
    }

    /// The keys [`set`](Self::set) takes, for the broker's known-keys list.
    pub const KEYS: &'static [&'static str] = &[
        "authenticationEnabled",
        "authorizationEnabled",
        "aclEnable",
        "authenticationWhitelist",
        "authorizationWhitelist",
        "aclPlainFile",
        "initAuthenticationUser",
        "innerClientAuthenticationCredentials",
    ];
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_parse() {
        let mut s = AuthSettings::default();
        assert!(s.set("authenticationEnabled", "true").unwrap());
        assert!(
            s.set(
                "initAuthenticationUser",
                r#"{"username":"root","password":"12345678"}"#
            )
            .unwrap()
        );
        assert!(
            s.set(
                "innerClientAuthenticationCredentials",
                r#"{"accessKey":"inner","secretKey":"s3"}"#
            )
            .unwrap()
        );
        assert_eq!(s.config_users().count(), 2);
        assert!(s.set("authenticationWhitelist", "10, 11").unwrap());
        assert_eq!(s.authentication_whitelist, vec![10, 11]);
        let err = s
            .set("initAuthenticationUser", "{\"password\":\"topsecret\"}")
            .unwrap_err();
        assert!(!err.contains("topsecret"));
        assert!(!s.set("brokerName", "x").unwrap());
    }
}
