//! Single broker requests shared by the consumers and the admin client:
//! offsets, consumer lists, send-back, queue locks.

use std::collections::BTreeSet;

use basalt_remoting::code::{request, response};
use basalt_remoting::header::{
    CommandHeader, ConsumerSendMsgBackRequestHeader, GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeRequestHeader, GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader, OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader, SearchOffsetRequestHeader, UpdateConsumerOffsetRequestHeader,
};
use basalt_remoting::protocol::{
    ConsumerListBody, LockBatchRequestBody, LockBatchResponseBody, UnlockBatchRequestBody,
};

use crate::error::{ClientError, Result};
use crate::instance::ClientInstance;
use crate::message::{MessageExt, TopicQueue};

impl ClientInstance {
    /// QUERY_CONSUMER_OFFSET at the queue's master: `None` when the broker
    /// has no offset for the group (QUERY_NOT_FOUND).
    pub async fn query_consumer_offset(&self, group: &str, mq: &TopicQueue) -> Result<Option<i64>> {
        let addr = self.master_or_member_of(mq).await?;
        let header = QueryConsumerOffsetRequestHeader {
            consumer_group: group.to_string(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            set_zero_if_not_found: None,
        };
        let cmd = self
            .request(request::QUERY_CONSUMER_OFFSET)
            .with_ext(header.to_ext());
        let resp = self
            .invoke(&addr, cmd, self.config().request_timeout)
            .await?;
        match resp.code {
            response::SUCCESS => Ok(Some(offset_of(&resp, &addr)?)),
            response::QUERY_NOT_FOUND => Ok(None),
            code => Err(ClientError::broker(code, resp.remark, &addr)),
        }
    }

    /// UPDATE_CONSUMER_OFFSET at the queue's master, waiting for the answer
    /// unless `oneway`.
    pub async fn update_consumer_offset(
        &self,
        group: &str,
        mq: &TopicQueue,
        offset: i64,
        oneway: bool,
    ) -> Result<()> {
        let addr = self.master_or_member_of(mq).await?;
        let header = UpdateConsumerOffsetRequestHeader {
            consumer_group: group.to_string(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            commit_offset: offset,
        };
        let cmd = self
            .request(request::UPDATE_CONSUMER_OFFSET)
            .with_ext(header.to_ext());
        if oneway {
            self.remoting().invoke_oneway(&addr, cmd).await?;
        } else {
            self.invoke_ok(&addr, cmd, self.config().request_timeout)
                .await?;
        }
        Ok(())
    }

    /// GET_MAX_OFFSET: the queue's next offset to be written.
    pub async fn max_offset(&self, mq: &TopicQueue) -> Result<i64> {
        let header = GetMaxOffsetRequestHeader {
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            committed: None,
        };
        let (addr, resp) = self
            .ask_queue_owner(mq, request::GET_MAX_OFFSET, header.to_ext())
            .await?;
        offset_of(&resp, &addr)
    }

    /// GET_MIN_OFFSET: the queue's smallest offset still stored.
    pub async fn min_offset(&self, mq: &TopicQueue) -> Result<i64> {
        let header = GetMinOffsetRequestHeader {
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
        };
        let (addr, resp) = self
            .ask_queue_owner(mq, request::GET_MIN_OFFSET, header.to_ext())
            .await?;
        offset_of(&resp, &addr)
    }

    /// SEARCH_OFFSET_BY_TIMESTAMP (lower boundary): the first offset whose
    /// message was stored at or after `timestamp_ms`.
    pub async fn search_offset(&self, mq: &TopicQueue, timestamp_ms: i64) -> Result<i64> {
        let header = SearchOffsetRequestHeader {
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            timestamp: timestamp_ms,
            boundary_type: None,
        };
        let (addr, resp) = self
            .ask_queue_owner(mq, request::SEARCH_OFFSET_BY_TIMESTAMP, header.to_ext())
            .await?;
        offset_of(&resp, &addr)
    }

    /// GET_EARLIEST_MSG_STORETIME: store time of the queue's oldest message.
    pub async fn earliest_msg_store_time(&self, mq: &TopicQueue) -> Result<i64> {
        let header = GetEarliestMsgStoretimeRequestHeader {
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
        };
        let (addr, resp) = self
            .ask_queue_owner(mq, request::GET_EARLIEST_MSG_STORETIME, header.to_ext())
            .await?;
        resp.decode_header::<GetEarliestMsgStoretimeResponseHeader>()
            .map(|h| h.timestamp)
            .map_err(|e| ClientError::bad_response(&addr, e))
    }

    /// GET_CONSUMER_LIST_BY_GROUP at a broker of `topic`: the client ids of
    /// the group's live consumers (Java `findConsumerIdList`).
    pub async fn consumer_id_list(&self, topic: &str, group: &str) -> Result<Vec<String>> {
        let addr = match self.routes().any_broker_of(topic) {
            Some(a) => a,
            None => {
                self.update_route(topic).await?;
                self.routes()
                    .any_broker_of(topic)
                    .ok_or_else(|| ClientError::NoRoute {
                        topic: topic.to_string(),
                    })?
            }
        };
        let header = GetConsumerListByGroupRequestHeader {
            consumer_group: group.to_string(),
        };
        let cmd = self
            .request(request::GET_CONSUMER_LIST_BY_GROUP)
            .with_ext(header.to_ext());
        let resp = self
            .invoke_ok(&addr, cmd, self.config().request_timeout)
            .await?;
        if resp.body.is_empty() {
            return Ok(Vec::new());
        }
        let body: ConsumerListBody = basalt_remoting::fastjson::from_slice(&resp.body)
            .map_err(|e| ClientError::bad_response(&addr, e))?;
        Ok(body.consumer_id_list)
    }

    /// CONSUMER_SEND_MSG_BACK: asks the broker holding `msg` to put it on the
    /// group's retry topic (or the DLQ) — docs/protocol.md#send-back.
    pub(crate) async fn consumer_send_msg_back(
        &self,
        addr: &str,
        msg: &MessageExt,
        group: &str,
        delay_level: i32,
        max_reconsume_times: i32,
    ) -> Result<()> {
        let header = ConsumerSendMsgBackRequestHeader {
            offset: msg.commit_log_offset,
            group: group.to_string(),
            delay_level,
            origin_msg_id: Some(msg.msg_id.clone()),
            origin_topic: Some(msg.topic.clone()),
            unit_mode: Some(false),
            max_reconsume_times: Some(max_reconsume_times),
        };
        let cmd = self
            .request(request::CONSUMER_SEND_MSG_BACK)
            .with_ext(header.to_ext());
        self.invoke_ok(addr, cmd, std::time::Duration::from_secs(5))
            .await?;
        Ok(())
    }

    /// LOCK_BATCH_MQ at `addr`: the queues now locked by this client.
    pub(crate) async fn lock_batch_mq(
        &self,
        addr: &str,
        group: &str,
        mqs: &[TopicQueue],
    ) -> Result<BTreeSet<TopicQueue>> {
        let body = LockBatchRequestBody {
            client_id: self.client_id().to_string(),
            consumer_group: group.to_string(),
            mq_set: mqs.iter().cloned().map(Into::into).collect(),
            only_this_broker: false,
        };
        let json =
            serde_json::to_vec(&body).map_err(|e| ClientError::InvalidArgument(e.to_string()))?;
        let cmd = self.request(request::LOCK_BATCH_MQ).with_body(json);
        let resp = self
            .invoke_ok(addr, cmd, self.config().request_timeout)
            .await?;
        if resp.body.is_empty() {
            return Ok(BTreeSet::new());
        }
        let locked: LockBatchResponseBody = basalt_remoting::fastjson::from_slice(&resp.body)
            .map_err(|e| ClientError::bad_response(addr, e))?;
        Ok(locked.lock_ok_mq_set.into_iter().map(Into::into).collect())
    }

    /// UNLOCK_BATCH_MQ at `addr` (oneway, as Java does on queue removal).
    pub(crate) async fn unlock_batch_mq(
        &self,
        addr: &str,
        group: &str,
        mqs: &[TopicQueue],
    ) -> Result<()> {
        let body = UnlockBatchRequestBody {
            client_id: self.client_id().to_string(),
            consumer_group: group.to_string(),
            mq_set: mqs.iter().cloned().map(Into::into).collect(),
            only_this_broker: false,
        };
        let json =
            serde_json::to_vec(&body).map_err(|e| ClientError::InvalidArgument(e.to_string()))?;
        let cmd = self.request(request::UNLOCK_BATCH_MQ).with_body(json);
        self.remoting().invoke_oneway(addr, cmd).await?;
        Ok(())
    }
}

impl ClientInstance {
    /// Sends a queue-level request to the broker that owns `mq` (its master,
    /// or another member when the master is gone); returns that broker's
    /// address and its successful answer.
    async fn ask_queue_owner(
        &self,
        mq: &TopicQueue,
        code: i32,
        ext: basalt_remoting::command::ExtFields,
    ) -> Result<(String, basalt_remoting::RemotingCommand)> {
        let addr = self.master_or_member_of(mq).await?;
        let cmd = self.request(code).with_ext(ext);
        let resp = self
            .invoke_ok(&addr, cmd, self.config().request_timeout)
            .await?;
        Ok((addr, resp))
    }
}

fn offset_of(resp: &basalt_remoting::RemotingCommand, addr: &str) -> Result<i64> {
    resp.decode_header::<OffsetResponseHeader>()
        .map(|h| h.offset)
        .map_err(|e| ClientError::bad_response(addr, e))
}
