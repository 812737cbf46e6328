//! The auth admin codes 3001–3010 (Java `AdminBrokerProcessor`'s
//! createUser … listAcl): headers and JSON bodies as `mqadmin` sends them.
//! Every change is saved before the answer; a refused or failed change
//! leaves users and ACLs as they were.

use basalt_remoting::RemotingCommand;
use basalt_remoting::code::response;

use crate::AuthError;
use crate::model::{Acl, AclInfo, PolicyType, Resource, UserInfo, UserType};
use crate::request_map::auth_codes as c;
use crate::sign::ACCESS_KEY;
use crate::store::AuthStore;

fn ok(body: Option<Vec<u8>>) -> RemotingCommand {
    let r = RemotingCommand::response(response::SUCCESS, None);
    match body {
        Some(b) => r.with_body(b),
        None => r,
    }
}

fn fail(e: AuthError) -> RemotingCommand {
    match e {
        AuthError::Invalid(m) => RemotingCommand::response(response::NO_PERMISSION, Some(m)),
        AuthError::Io(m) => {
            tracing::error!(error = %m, "auth metadata not saved");
            RemotingCommand::response(
                response::SYSTEM_ERROR,
                Some("An system error occurred, please try again later.".into()),
            )
        }
    }
}

fn field<'a>(req: &'a RemotingCommand, key: &str) -> Option<&'a str> {
    req.ext_fields.get(key).filter(|v| !v.trim().is_empty())
}

fn body<T: serde::de::DeserializeOwned>(req: &RemotingCommand) -> Result<T, AuthError> {
    basalt_remoting::fastjson::from_slice(&req.body)
        .map_err(|e| AuthError::Invalid(format!("unreadable body: {e}")))
}

fn json<T: serde::Serialize>(v: &T) -> Option<Vec<u8>> {
    serde_json::to_vec(v).ok()
}

/// Whether the caller signed as a super user (no AccessKey: authentication
/// is off, as Java reads it).
fn caller_is_super(store: &AuthStore, req: &RemotingCommand) -> bool {
    match req.ext_fields.get(ACCESS_KEY) {
        None => true,
        Some(ak) => store
            .user(ak)
            .is_some_and(|u| u.user_type == UserType::Super),
    }
}

/// Answers one auth admin request. Blocking (saves fsync): run it off the
/// async workers. `None` for codes that are not auth admin codes.
pub fn handle(store: &AuthStore, req: &RemotingCommand) -> Option<RemotingCommand> {
    let result = match req.code {
        c::CREATE_USER | c::UPDATE_USER => put_user(store, req),
        c::DELETE_USER => delete_user(store, req),
        c::GET_USER => get_user(store, req),
        c::LIST_USER => Ok(list_users(store, req)),
        c::CREATE_ACL | c::UPDATE_ACL => put_acl(store, req),
        c::DELETE_ACL => delete_acl(store, req),
        c::GET_ACL => get_acl(store, req),
        c::LIST_ACL => Ok(list_acls(store, req)),
        _ => return None,
    };
    Some(result.unwrap_or_else(fail))
}

fn username(req: &RemotingCommand) -> Result<&str, AuthError> {
    field(req, "username").ok_or_else(|| AuthError::Invalid("The username is blank".into()))
}

fn put_user(store: &AuthStore, req: &RemotingCommand) -> Result<RemotingCommand, AuthError> {
    let name = username(req)?;
    let mut info: UserInfo = body(req)?;
    info.username = Some(name.to_string());
    let wants_super =
        info.user_type.as_deref().map(UserType::parse).transpose()? == Some(UserType::Super);
    let old_super = store
        .user(name)
        .is_some_and(|u| u.user_type == UserType::Super);
    if (wants_super || old_super) && !caller_is_super(store, req) {
        return Err(AuthError::Invalid(
            "The super user can only be create or update by super user".into(),
        ));
    }
    if req.code == c::CREATE_USER {
        store.create_user(&info)?;
    } else {
        store.update_user(name, &info)?;
    }
    Ok(ok(None))
}

fn delete_user(store: &AuthStore, req: &RemotingCommand) -> Result<RemotingCommand, AuthError> {
    let name = username(req)?;
    if store
        .user(name)
        .is_some_and(|u| u.user_type == UserType::Super)
        && !caller_is_super(store, req)
    {
        return Err(AuthError::Invalid(
            "The super user can only be update by super user".into(),
        ));
    }
    store.delete_user(name)?;
    Ok(ok(None))
}

fn get_user(store: &AuthStore, req: &RemotingCommand) -> Result<RemotingCommand, AuthError> {
    let name = username(req)?;
    Ok(ok(store.user(name).and_then(|u| json(&u.info(false)))))
}

fn list_users(store: &AuthStore, req: &RemotingCommand) -> RemotingCommand {
    let filter = field(req, "filter").unwrap_or("");
    let users: Vec<UserInfo> = store
        .snapshot()
        .users
        .values()
        .filter(|u| u.username.contains(filter))
        .map(|u| u.info(false))
        .collect();
    ok((!users.is_empty()).then(|| json(&users)).flatten())
}

fn put_acl(store: &AuthStore, req: &RemotingCommand) -> Result<RemotingCommand, AuthError> {
    let subject = field(req, "subject");
    let info: AclInfo = body(req)?;
    if info.policies.is_empty() {
        return Err(AuthError::Invalid("The body of acl is null".into()));
    }
    store.put_acl(Acl::from_info(&info, subject)?)?;
    Ok(ok(None))
}

fn delete_acl(store: &AuthStore, req: &RemotingCommand) -> Result<RemotingCommand, AuthError> {
    let subject =
        field(req, "subject").ok_or_else(|| AuthError::Invalid("The subject is blank".into()))?;
    let policy = PolicyType::parse(field(req, "policyType"))?;
    let resource = field(req, "resource").map(Resource::parse).transpose()?;
    store.delete_acl(subject, policy, resource.as_ref())?;
    Ok(ok(None))
}

fn get_acl(store: &AuthStore, req: &RemotingCommand) -> Result<RemotingCommand, AuthError> {
    let subject =
        field(req, "subject").ok_or_else(|| AuthError::Invalid("The subject is blank".into()))?;
    Ok(ok(store
        .snapshot()
        .acls
        .get(subject)
        .and_then(|a| json(&a.info()))))
}

fn list_acls(store: &AuthStore, req: &RemotingCommand) -> RemotingCommand {
    let sf = field(req, "subjectFilter").unwrap_or("");
    let rf = field(req, "resourceFilter").unwrap_or("");
    let acls: Vec<AclInfo> = store
        .snapshot()
        .acls
        .values()
        .filter(|a| a.subject.contains(sf))
        .filter(|a| {
            rf.is_empty()
                || a.policies
                    .iter()
                    .flat_map(|(_, e)| e)
                    .any(|e| e.resource.key().contains(rf))
        })
        .map(Acl::info)
        .collect();
    ok((!acls.is_empty()).then(|| json(&acls)).flatten())
}
