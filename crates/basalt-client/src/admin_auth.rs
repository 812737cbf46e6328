//! The [`Admin`] calls for ACL 2.0 users and ACLs: the auth admin codes
//! 3001–3010 with the headers and JSON bodies Java's `MQClientAPIImpl`
//! sends (`createUser` … `listAcl`), to one broker at a time.

use basalt_auth::model::{AclInfo, UserInfo};
use basalt_auth::request_map::auth_codes as code;
use basalt_remoting::RemotingCommand;

use crate::admin::Admin;
use crate::error::{ClientError, Result};

impl Admin {
    async fn auth_call(
        &self,
        addr: &str,
        code: i32,
        fields: &[(&str, Option<&str>)],
        body: Option<Vec<u8>>,
    ) -> Result<RemotingCommand> {
        let mut cmd = self.instance().request(code);
        // As Java encodes a header: null fields are left out.
        for (k, v) in fields {
            if let Some(v) = v {
                cmd.ext_fields.insert(*k, *v);
            }
        }
        if let Some(b) = body {
            cmd = cmd.with_body(b);
        }
        self.instance().invoke_ok(addr, cmd, self.timeout()).await
    }

    /// AUTH_CREATE_USER (3001): header `username`, body the `UserInfo`.
    pub async fn create_user(&self, addr: &str, user: &UserInfo) -> Result<()> {
        self.put_user(addr, code::CREATE_USER, user).await
    }

    /// AUTH_UPDATE_USER (3002): header `username`, body the `UserInfo`
    /// with the fields to change.
    pub async fn update_user(&self, addr: &str, user: &UserInfo) -> Result<()> {
        self.put_user(addr, code::UPDATE_USER, user).await
    }

    async fn put_user(&self, addr: &str, code: i32, user: &UserInfo) -> Result<()> {
        let body = serde_json::to_vec(user).map_err(|e| invalid(e.to_string()))?;
        let name = user.username.as_deref();
        self.auth_call(addr, code, &[("username", name)], Some(body))
            .await?;
        Ok(())
    }

    /// AUTH_DELETE_USER (3003).
    pub async fn delete_user(&self, addr: &str, username: &str) -> Result<()> {
        self.auth_call(
            addr,
            code::DELETE_USER,
            &[("username", Some(username))],
            None,
        )
        .await?;
        Ok(())
    }

    /// AUTH_GET_USER (3004): `None` when the broker has no such user (an
    /// empty body).
    pub async fn get_user(&self, addr: &str, username: &str) -> Result<Option<UserInfo>> {
        let resp = self
            .auth_call(addr, code::GET_USER, &[("username", Some(username))], None)
            .await?;
        decode_opt(addr, &resp.body)
    }

    /// AUTH_LIST_USER (3005): users whose name contains `filter`.
    pub async fn list_users(&self, addr: &str, filter: Option<&str>) -> Result<Vec<UserInfo>> {
        let resp = self
            .auth_call(addr, code::LIST_USER, &[("filter", filter)], None)
            .await?;
        Ok(decode_opt(addr, &resp.body)?.unwrap_or_default())
    }

    /// AUTH_CREATE_ACL (3006): header `subject`, body the `AclInfo`.
    pub async fn create_acl(&self, addr: &str, acl: &AclInfo) -> Result<()> {
        self.put_acl(addr, code::CREATE_ACL, acl).await
    }

    /// AUTH_UPDATE_ACL (3007): header `subject`, body the `AclInfo`.
    pub async fn update_acl(&self, addr: &str, acl: &AclInfo) -> Result<()> {
        self.put_acl(addr, code::UPDATE_ACL, acl).await
    }

    async fn put_acl(&self, addr: &str, code: i32, acl: &AclInfo) -> Result<()> {
        let body = serde_json::to_vec(acl).map_err(|e| invalid(e.to_string()))?;
        let subject = acl.subject.as_deref();
        self.auth_call(addr, code, &[("subject", subject)], Some(body))
            .await?;
        Ok(())
    }

    /// AUTH_DELETE_ACL (3008): headers `subject`, `policyType`, `resource`;
    /// without a resource the subject's whole ACL goes.
    pub async fn delete_acl(
        &self,
        addr: &str,
        subject: &str,
        policy_type: Option<&str>,
        resource: Option<&str>,
    ) -> Result<()> {
        let fields = [
            ("subject", Some(subject)),
            ("policyType", policy_type),
            ("resource", resource),
        ];
        self.auth_call(addr, code::DELETE_ACL, &fields, None)
            .await?;
        Ok(())
    }

    /// AUTH_GET_ACL (3009): `None` when the subject has no ACL.
    pub async fn get_acl(&self, addr: &str, subject: &str) -> Result<Option<AclInfo>> {
        let resp = self
            .auth_call(addr, code::GET_ACL, &[("subject", Some(subject))], None)
            .await?;
        decode_opt(addr, &resp.body)
    }

    /// AUTH_LIST_ACL (3010): ACLs whose subject contains `subject_filter`
    /// and with an entry whose resource contains `resource_filter`.
    pub async fn list_acls(
        &self,
        addr: &str,
        subject_filter: Option<&str>,
        resource_filter: Option<&str>,
    ) -> Result<Vec<AclInfo>> {
        let fields = [
            ("subjectFilter", subject_filter),
            ("resourceFilter", resource_filter),
        ];
        let resp = self.auth_call(addr, code::LIST_ACL, &fields, None).await?;
        Ok(decode_opt(addr, &resp.body)?.unwrap_or_default())
    }
}

fn invalid(e: String) -> ClientError {
    ClientError::InvalidArgument(e)
}

/// An answer's JSON body; `None` for an empty body (or `null`).
fn decode_opt<T: serde::de::DeserializeOwned>(addr: &str, body: &[u8]) -> Result<Option<T>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    basalt_remoting::fastjson::from_slice::<Option<T>>(body)
        .map_err(|e| ClientError::bad_response(addr, e))
}
