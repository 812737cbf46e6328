//! Topic configuration bodies: DataVersion, TopicConfig, the wrapper a broker
//! registers with, and REGISTER_BROKER's body in plain and compressed form
//! (docs/protocol.md#broker-registration, docs/storage-format.md#topicsjson).

use std::collections::BTreeMap;
use std::io::{Read, Write};

use serde::{Deserialize, Serialize};

use super::BodyError;
use super::java_enum;

/// The version stamp of a broker's topic table (`DataVersion`). Two stamps are
/// equal when all three parts are; the NameServer skips a topic update when
/// the stamp it last saw from the broker is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct DataVersion {
    #[serde(default)]
    pub counter: i64,
    /// 5.x only; 4.x readers ignore it.
    #[serde(default)]
    pub state_version: i64,
    #[serde(default)]
    pub timestamp: i64,
}

impl DataVersion {
    /// A fresh version stamped `now_ms`.
    pub fn new(now_ms: i64) -> Self {
        Self {
            counter: 0,
            state_version: 0,
            timestamp: now_ms,
        }
    }

    /// Advances the version after a change (`DataVersion.nextVersion`).
    pub fn next_version(&mut self, now_ms: i64) {
        self.timestamp = now_ms;
        self.counter += 1;
    }
}

java_enum! {
    /// `TopicFilterType`.
    pub enum TopicFilterType {
        #[default]
        SingleTag = "SINGLE_TAG",
        MultiTag = "MULTI_TAG",
    }
}

/// One topic's configuration (`TopicConfig`). Fields are declared in
/// alphabetical order so serde writes them as fastjson does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfig {
    /// 5.x only.
    #[serde(default)]
    pub attributes: BTreeMap<String, String>,
    #[serde(default)]
    pub order: bool,
    #[serde(default = "default_perm")]
    pub perm: i32,
    #[serde(default = "default_queue_nums")]
    pub read_queue_nums: i32,
    #[serde(default)]
    pub topic_filter_type: TopicFilterType,
    #[serde(default)]
    pub topic_name: String,
    #[serde(default)]
    pub topic_sys_flag: i32,
    #[serde(default = "default_queue_nums")]
    pub write_queue_nums: i32,
}

fn default_perm() -> i32 {
    basalt_common::constants::perm::READ | basalt_common::constants::perm::WRITE
}

fn default_queue_nums() -> i32 {
    16
}

impl TopicConfig {
    /// A read-write topic with `queues` read and write queues.
    pub fn new(topic_name: impl Into<String>, queues: i32) -> Self {
        Self {
            attributes: BTreeMap::new(),
            order: false,
            perm: default_perm(),
            read_queue_nums: queues,
            topic_filter_type: TopicFilterType::SingleTag,
            topic_name: topic_name.into(),
            topic_sys_flag: 0,
            write_queue_nums: queues,
        }
    }

    /// The space-separated line of the compressed register body
    /// (`TopicConfig.encode`): `name read write perm filterType [attributesJSON]`.
    /// `topicSysFlag` and `order` are not part of it, as in Java.
    pub fn encode_line(&self) -> String {
        let mut s = format!(
            "{} {} {} {} {}",
            self.topic_name,
            self.read_queue_nums,
            self.write_queue_nums,
            self.perm,
            self.topic_filter_type.name()
        );
        if !self.attributes.is_empty() {
            s.push(' ');
            s.push_str(&serde_json::to_string(&self.attributes).unwrap_or_else(|_| "{}".into()));
        }
        s
    }

    /// Parses a line written by [`Self::encode_line`] (`TopicConfig.decode`).
    pub fn decode_line(line: &str) -> Result<Self, BodyError> {
        let bad = |what: &str| BodyError::Compressed(format!("topic config line {line:?}: {what}"));
        let mut parts = line.splitn(6, ' ');
        let mut next = |what: &str| parts.next().ok_or_else(|| bad(what));
        let topic_name = next("no topic name")?.to_string();
        let read_queue_nums = next("no readQueueNums")?
            .parse()
            .map_err(|_| bad("bad readQueueNums"))?;
        let write_queue_nums = next("no writeQueueNums")?
            .parse()
            .map_err(|_| bad("bad writeQueueNums"))?;
        let perm = next("no perm")?.parse().map_err(|_| bad("bad perm"))?;
        let topic_filter_type = TopicFilterType::from_name(next("no topicFilterType")?);
        let attributes = match parts.next() {
            Some(json) => crate::fastjson::from_str(json)?,
            None => BTreeMap::new(),
        };
        Ok(Self {
            attributes,
            order: false,
            perm,
            read_queue_nums,
            topic_filter_type,
            topic_name,
            topic_sys_flag: 0,
            write_queue_nums,
        })
    }
}

/// A broker's topic table with its version (`TopicConfigSerializeWrapper`;
/// the 5.x mapping fields are read and ignored).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfigSerializeWrapper {
    #[serde(default)]
    pub data_version: DataVersion,
    #[serde(default)]
    pub topic_config_table: BTreeMap<String, TopicConfig>,
}

/// REGISTER_BROKER's body (`RegisterBrokerBody`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct RegisterBrokerBody {
    #[serde(default)]
    pub filter_server_list: Vec<String>,
    #[serde(default)]
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
}

/// Largest inflated register body accepted (a broker with 100k topics stays
/// far below this), so a small deflate bomb cannot exhaust memory.
pub const MAX_INFLATED_REGISTER_BODY: u64 = 256 * 1024 * 1024;

impl RegisterBrokerBody {
    /// Decodes the body as the request header says it was sent.
    /// `broker_version` is the request's `version` (the compressed form has a
    /// mapping section from V5_0_0 on).
    pub fn decode(body: &[u8], compressed: bool, broker_version: i32) -> Result<Self, BodyError> {
        if compressed {
            Self::decode_compressed(body, broker_version)
        } else {
            crate::fastjson::from_slice(body).map_err(BodyError::from)
        }
    }

    /// The plain JSON form.
    pub fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// The compressed form (docs/protocol.md#broker-registration): a zlib
    /// stream of length-prefixed parts.
    pub fn encode_compressed(&self, broker_version: i32) -> Result<Vec<u8>, BodyError> {
        let mut raw = Vec::new();
        let put = |raw: &mut Vec<u8>, bytes: &[u8]| {
            raw.extend_from_slice(&(bytes.len() as i32).to_be_bytes());
            raw.extend_from_slice(bytes);
        };
        let wrapper = &self.topic_config_serialize_wrapper;
        put(
            &mut raw,
            &serde_json::to_vec(&wrapper.data_version)
                .map_err(|e| BodyError::Json(e.to_string()))?,
        );
        raw.extend_from_slice(&(wrapper.topic_config_table.len() as i32).to_be_bytes());
        for tc in wrapper.topic_config_table.values() {
            put(&mut raw, tc.encode_line().as_bytes());
        }
        put(
            &mut raw,
            &serde_json::to_vec(&self.filter_server_list)
                .map_err(|e| BodyError::Json(e.to_string()))?,
        );
        if broker_version >= crate::code::version::V5_0_0 {
            raw.extend_from_slice(&0i32.to_be_bytes());
        }
        let mut enc = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
        enc.write_all(&raw)
            .and_then(|_| enc.finish())
            .map_err(|e| BodyError::Compressed(e.to_string()))
    }

    /// Decodes the compressed form. The topic-queue-mapping section (static
    /// topics) is read and dropped.
    pub fn decode_compressed(body: &[u8], broker_version: i32) -> Result<Self, BodyError> {
        let mut raw = Vec::new();
        flate2::read::ZlibDecoder::new(body)
            .take(MAX_INFLATED_REGISTER_BODY + 1)
            .read_to_end(&mut raw)
            .map_err(|e| BodyError::Compressed(format!("inflate: {e}")))?;
        if raw.len() as u64 > MAX_INFLATED_REGISTER_BODY {
            return Err(BodyError::Compressed(format!(
                "inflates to more than {MAX_INFLATED_REGISTER_BODY} bytes"
            )));
        }
        let mut r = Reader { buf: &raw, at: 0 };
        let data_version: DataVersion = crate::fastjson::from_slice(r.chunk("dataVersion")?)?;
        let count = r.count("topic config count")?;
        let mut table = BTreeMap::new();
        for _ in 0..count {
            let line = std::str::from_utf8(r.chunk("topic config")?)
                .map_err(|_| BodyError::Compressed("topic config is not UTF-8".into()))?;
            let tc = TopicConfig::decode_line(line)?;
            table.insert(tc.topic_name.clone(), tc);
        }
        let filter_server_list: Vec<String> = {
            let chunk = r.chunk("filterServerList")?;
            let v: Option<Vec<String>> = crate::fastjson::from_slice(chunk)?;
            v.unwrap_or_default()
        };
        if broker_version >= crate::code::version::V5_0_0 && r.at < raw.len() {
            let n = r.count("topic queue mapping count")?;
            for _ in 0..n {
                r.chunk("topic queue mapping")?;
            }
        }
        Ok(Self {
            filter_server_list,
            topic_config_serialize_wrapper: TopicConfigSerializeWrapper {
                data_version,
                topic_config_table: table,
            },
        })
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn i32(&mut self, what: &str) -> Result<i32, BodyError> {
        let b = self
            .buf
            .get(self.at..self.at + 4)
            .ok_or_else(|| BodyError::Compressed(format!("truncated before {what}")))?;
        self.at += 4;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn count(&mut self, what: &str) -> Result<usize, BodyError> {
        let n = self.i32(what)?;
        // Each entry needs at least its 4-byte length.
        if n < 0 || n as usize > (self.buf.len() - self.at) / 4 {
            return Err(BodyError::Compressed(format!("{what} {n} is out of range")));
        }
        Ok(n as usize)
    }

    fn chunk(&mut self, what: &str) -> Result<&'a [u8], BodyError> {
        let len = self.i32(what)?;
        if len < 0 || len as usize > self.buf.len() - self.at {
            return Err(BodyError::Compressed(format!(
                "{what} length {len} is out of range"
            )));
        }
        let s = &self.buf[self.at..self.at + len as usize];
        self.at += len as usize;
        Ok(s)
    }
}
