//! The read side of a `MessageStore`: pulls, offsets by queue and time,
//! lookups by offset and key.

use super::*;

impl MessageStore {
    pub fn get_consume_queue(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        self.consume_queues.get(topic, queue_id)
    }

    /// Reads up to `max_msgs` messages of a queue from `offset`, following
    /// RocketMQ's `DefaultMessageStore.getMessage` rules (docs/protocol.md#pull-results).
    pub fn get_message(
        &self,
        req: &GetMessageRequest<'_>,
        filter: Option<&dyn MessageFilter>,
    ) -> GetMessageResult {
        let correct = |old: i64, new: i64| if req.correct_offsets { new } else { old };
        let mut result = GetMessageResult {
            status: GetMessageStatus::NoMatchedLogicQueue,
            next_begin_offset: req.offset,
            min_offset: 0,
            max_offset: 0,
            messages: Vec::new(),
            buffer_total_size: 0,
            suggest_pulling_from_slave: false,
        };
        let Some(cq) = self.consume_queues.get(req.topic, req.queue_id) else {
            result.next_begin_offset = correct(req.offset, 0);
            return result;
        };
        let (min, max) = (cq.min_offset(), cq.max_offset());
        result.min_offset = min;
        result.max_offset = max;
        let offset = req.offset;
        if max == 0 {
            result.status = GetMessageStatus::NoMessageInQueue;
            result.next_begin_offset = correct(offset, 0);
            return result;
        }
        if offset < min {
            result.status = GetMessageStatus::OffsetTooSmall;
            result.next_begin_offset = correct(offset, min);
            return result;
        }
        if offset == max {
            result.status = GetMessageStatus::OffsetOverflowOne;
            result.next_begin_offset = correct(offset, offset);
            return result;
        }
        if offset > max {
            result.status = GetMessageStatus::OffsetOverflowBadly;
            result.next_begin_offset = correct(offset, if min == 0 { min } else { max });
            return result;
        }
        let Some(run) = cq.units_from(offset) else {
            result.status = GetMessageStatus::OffsetFoundNull;
            result.next_begin_offset = correct(offset, cq.roll_next_file(offset));
            return result;
        };

        let log = self.log();
        let max_phys = log.max_offset();
        let memory = self.total_memory as f64
            * (self.config.access_message_in_memory_max_ratio as f64 / 100.0);
        let max_filter_units = 16_000usize.max(req.max_msgs * UNIT_SIZE) / UNIT_SIZE;
        let mut status = GetMessageStatus::NoMatchedMessage;
        let mut next_phy_file_start = i64::MIN;
        let mut max_phy_pulling = 0i64;
        let mut examined = 0usize;
        for unit in run.iter() {
            if examined >= max_filter_units {
                break;
            }
            let phys = unit.physical_offset;
            let size = unit.size;
            if unit.is_filler() {
                examined += 1;
                continue;
            }
            max_phy_pulling = phys;
            if next_phy_file_start != i64::MIN && phys < next_phy_file_start {
                examined += 1;
                continue;
            }
            let in_disk = (max_phys - phys) as f64 > memory;
            if self.batch_full(size as usize, req, &result, in_disk) {
                break;
            }
            examined += 1;
            if let Some(f) = filter
                && !f.matches_tags_code(unit.tags_code)
            {
                if result.buffer_total_size == 0 {
                    status = GetMessageStatus::NoMatchedMessage;
                }
                continue;
            }
            let Some(bytes) = log.read_bytes(phys, size as usize) else {
                if result.buffer_total_size == 0 {
                    status = GetMessageStatus::MessageWasRemoving;
                }
                next_phy_file_start = log.roll_next_file(phys);
                continue;
            };
            if let Some(f) = filter
                && !f.matches_record(&bytes)
            {
                if result.buffer_total_size == 0 {
                    status = GetMessageStatus::NoMatchedMessage;
                }
                continue;
            }
            result.buffer_total_size += bytes.len();
            result.messages.push(bytes);
            status = GetMessageStatus::Found;
            next_phy_file_start = i64::MIN;
        }
        result.status = status;
        result.next_begin_offset = offset + examined as i64;
        result.suggest_pulling_from_slave = (max_phys - max_phy_pulling) as f64 > memory;
        result
    }

    fn batch_full(
        &self,
        size: usize,
        req: &GetMessageRequest<'_>,
        r: &GetMessageResult,
        in_disk: bool,
    ) -> bool {
        let count = r.messages.len();
        if r.buffer_total_size == 0 || count == 0 {
            return false;
        }
        if req.max_msgs <= count {
            return true;
        }
        if let Some(max_bytes) = req.max_bytes
            && r.buffer_total_size + size > max_bytes
        {
            return true;
        }
        let c = &self.config;
        if in_disk {
            r.buffer_total_size + size > c.max_transfer_bytes_on_message_in_disk
                || count > c.max_transfer_count_on_message_in_disk - 1
        } else {
            r.buffer_total_size + size > c.max_transfer_bytes_on_message_in_memory
                || count > c.max_transfer_count_on_message_in_memory - 1
        }
    }

    /// Whether the record at `phys` is close enough to the end of the log to
    /// count as in memory (`accessMessageInMemoryMaxRatio` of RAM).
    pub fn is_in_memory(&self, phys: i64) -> bool {
        let memory = self.total_memory as f64
            * (self.config.access_message_in_memory_max_ratio as f64 / 100.0);
        ((self.log().max_offset() - phys) as f64) <= memory
    }

    /// The next offset to be written in a queue (0 if the queue does not exist).
    pub fn max_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.consume_queues
            .get(topic, queue_id)
            .map(|q| q.max_offset())
            .unwrap_or(0)
    }

    /// The first readable offset of a queue (0 if the queue does not exist).
    pub fn min_offset_in_queue(&self, topic: &str, queue_id: i32) -> i64 {
        self.consume_queues
            .get(topic, queue_id)
            .map(|q| q.min_offset())
            .unwrap_or(0)
    }

    /// CommitLog offset of a queue's message at `offset`.
    pub fn commit_log_offset_in_queue(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
    ) -> Option<i64> {
        let u = self.consume_queues.get(topic, queue_id)?.unit_at(offset)?;
        (!u.is_filler()).then_some(u.physical_offset)
    }

    /// Store time of a queue's message at `offset`.
    pub fn message_store_timestamp(&self, topic: &str, queue_id: i32, offset: i64) -> Option<i64> {
        let phys = self.commit_log_offset_in_queue(topic, queue_id, offset)?;
        self.log().store_timestamp_at(phys)
    }

    /// Store time of the oldest readable message of a queue.
    pub fn earliest_message_time(&self, topic: &str, queue_id: i32) -> Option<i64> {
        let min = self.min_offset_in_queue(topic, queue_id);
        self.message_store_timestamp(topic, queue_id, min)
    }

    /// Binary search of a queue by store time (SEARCH_OFFSET_BY_TIMESTAMP).
    pub fn offset_in_queue_by_time(
        &self,
        topic: &str,
        queue_id: i32,
        timestamp: i64,
        boundary: BoundaryType,
    ) -> i64 {
        let Some(cq) = self.consume_queues.get(topic, queue_id) else {
            return 0;
        };
        let (min, max) = (cq.min_offset(), cq.max_offset());
        if max <= min {
            return min;
        }
        let log = self.log();
        let ts_at = |o: i64| -> Option<i64> {
            let u = cq.unit_at(o)?;
            if u.is_filler() {
                return None;
            }
            log.store_timestamp_at(u.physical_offset)
        };
        // First readable message still in the CommitLog.
        let mut lo = min;
        while lo < max && ts_at(lo).is_none() {
            lo += 1;
        }
        if lo >= max {
            return min;
        }
        let hi_last = max - 1;
        match boundary {
            BoundaryType::Lower => {
                // First offset with time >= timestamp; max if none.
                let (mut l, mut h) = (lo, max);
                while l < h {
                    let mid = l + (h - l) / 2;
                    match ts_at(mid) {
                        Some(t) if t < timestamp => l = mid + 1,
                        _ => h = mid,
                    }
                }
                l
            }
            BoundaryType::Upper => {
                // Last offset with time <= timestamp; lo if none.
                let (mut l, mut h) = (lo, hi_last);
                if ts_at(l).map(|t| t > timestamp).unwrap_or(true) {
                    return lo;
                }
                while l < h {
                    let mid = l + (h - l + 1) / 2;
                    match ts_at(mid) {
                        Some(t) if t <= timestamp => l = mid,
                        _ => h = mid - 1,
                    }
                }
                l
            }
        }
    }

    /// The stored record at a CommitLog offset (VIEW_MESSAGE_BY_ID).
    pub fn look_message_by_offset(&self, phys: i64) -> Option<Bytes> {
        self.log().read_record(phys)
    }

    /// Messages of `topic` whose `KEYS` or unique key equals `key`, stored in
    /// `[begin, end]`, newest first, at most `max` (QUERY_MESSAGE).
    pub fn query_message(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        begin: i64,
        end: i64,
    ) -> QueryMessageResult {
        let mut out = QueryMessageResult::default();
        let Some(index) = &self.index else {
            return out;
        };
        if let Some(last) = index.files().last() {
            out.index_last_update_timestamp = last.end_timestamp();
            out.index_last_update_phy_offset = last.end_phy_offset();
        }
        let log = self.log();
        for phys in index.query_offsets(topic, key, max, begin, end) {
            let Some(rec) = log.read_record(phys) else {
                continue;
            };
            let Ok(view) = RecordView::parse(&rec, false) else {
                continue;
            };
            if view.topic != topic.as_bytes() {
                continue;
            }
            let key_matches = view
                .property(basalt_common::constants::property::UNIQ_KEY)
                .map(|u| u == key.as_bytes())
                .unwrap_or(false)
                || view
                    .property(basalt_common::constants::property::KEYS)
                    .map(|ks| ks.split(|b| *b == b' ').any(|k| k == key.as_bytes()))
                    .unwrap_or(false);
            if key_matches {
                out.messages.push(rec);
            }
        }
        out
    }
}
