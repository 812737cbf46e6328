//! The KV config requests (PUT_KV_CONFIG 100, GET_KV_CONFIG 101,
//! DELETE_KV_CONFIG 102, GET_KVLIST_BY_NAMESPACE 219), answered as Java's
//! `DefaultRequestProcessor` answers them (docs/protocol.md#kv-config).

use std::sync::Arc;

use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, GetKvConfigResponseHeader, GetKvListByNamespaceRequestHeader,
    KvConfigKeyRequestHeader, PutKvConfigRequestHeader,
};
use basalt_remoting::protocol::KvTable;
use basalt_remoting::{HeaderError, RemotingCommand};

use crate::kv_config::{KvConfigError, KvConfigManager, MAX_NAME_LEN};

fn answer(req: &RemotingCommand, code: i32, remark: Option<String>) -> RemotingCommand {
    let mut resp = RemotingCommand::response(code, remark);
    resp.opaque = req.opaque;
    resp
}

fn bad_header(req: &RemotingCommand, e: HeaderError) -> RemotingCommand {
    answer(req, response::SYSTEM_ERROR, Some(e.to_string()))
}

/// A namespace or key named in a lookup: bounded like stored ones, so a
/// lookup cannot be used to make the NameServer log or copy huge strings.
fn check_name(req: &RemotingCommand, what: &str, name: &str) -> Result<(), Box<RemotingCommand>> {
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(Box::new(answer(
            req,
            response::SYSTEM_ERROR,
            Some(format!("{what} must be 1 to {MAX_NAME_LEN} bytes")),
        )));
    }
    Ok(())
}

/// PUT_KV_CONFIG and DELETE_KV_CONFIG: the change is made, then written
/// to kvConfig.json off the async workers; the answer comes once the file
/// holds it. A failed write answers SYSTEM_ERROR (the change stays in
/// memory and the next successful write includes it).
pub async fn change(kv: &Arc<KvConfigManager>, req: &RemotingCommand) -> RemotingCommand {
    let generation = if req.code == request::PUT_KV_CONFIG {
        let h = match PutKvConfigRequestHeader::from_ext(&req.ext_fields) {
            Ok(h) => h,
            Err(e) => return bad_header(req, e),
        };
        match kv.put(&h.namespace, &h.key, &h.value) {
            Ok(g) => Some(g),
            Err(e) => return answer(req, response::SYSTEM_ERROR, Some(e.to_string())),
        }
    } else {
        let h = match KvConfigKeyRequestHeader::from_ext(&req.ext_fields) {
            Ok(h) => h,
            Err(e) => return bad_header(req, e),
        };
        if let Err(resp) =
            check_name(req, "namespace", &h.namespace).and_then(|()| check_name(req, "key", &h.key))
        {
            return *resp;
        }
        // Deleting what is not there succeeds, as in Java.
        kv.delete(&h.namespace, &h.key)
    };
    if let Some(g) = generation {
        let writer = Arc::clone(kv);
        let written = tokio::task::spawn_blocking(move || writer.persist(g)).await;
        let failed = match written {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(e) => Some(KvConfigError::Persist {
                path: kv.path().map(|p| p.to_path_buf()).unwrap_or_default(),
                detail: e.to_string(),
            }),
        };
        if let Some(e) = failed {
            tracing::error!(error = %e, "KV config not persisted");
            return answer(req, response::SYSTEM_ERROR, Some(e.to_string()));
        }
    }
    answer(req, response::SUCCESS, None)
}

/// GET_KV_CONFIG: the value in the `value` ext field, or QUERY_NOT_FOUND.
pub fn get(kv: &KvConfigManager, req: &RemotingCommand) -> RemotingCommand {
    let h = match KvConfigKeyRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(req, e),
    };
    if let Err(resp) =
        check_name(req, "namespace", &h.namespace).and_then(|()| check_name(req, "key", &h.key))
    {
        return *resp;
    }
    match kv.get(&h.namespace, &h.key) {
        Some(value) => answer(req, response::SUCCESS, None)
            .with_ext(GetKvConfigResponseHeader { value: Some(value) }.to_ext()),
        None => answer(
            req,
            response::QUERY_NOT_FOUND,
            Some(format!(
                "No config item, Namespace: {} Key: {}",
                h.namespace, h.key
            )),
        ),
    }
}

/// GET_KVLIST_BY_NAMESPACE: a `KVTable` body, or QUERY_NOT_FOUND.
pub fn list(kv: &KvConfigManager, req: &RemotingCommand) -> RemotingCommand {
    let h = match GetKvListByNamespaceRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(req, e),
    };
    if let Err(resp) = check_name(req, "namespace", &h.namespace) {
        return *resp;
    }
    match kv.namespace(&h.namespace) {
        Some(table) => answer(req, response::SUCCESS, None)
            .with_body(serde_json::to_vec(&KvTable { table }).unwrap_or_default()),
        None => answer(
            req,
            response::QUERY_NOT_FOUND,
            Some(format!("No config item, Namespace: {}", h.namespace)),
        ),
    }
}
