//! What a scan of the CommitLog checks in each record: its CRC, and whether
//! it must end with the whole-record CRC trailer (docs/storage-format.md#crc-trailer).
//!
//! The record format cannot say that a trailer was written: a record whose
//! trailer key took a flipped bit, or whose last sector a power loss tore
//! back to zeros, reads as a record written without one and passes on its
//! body CRC, while its header fields, topic and properties go unchecked.
//! The checkpoint's [`TrailerRule`] says which records this store appended
//! with the trailer; recovery, `basalt store check` and `repair` take such
//! a record without a whole trailer for damage.

use basalt_common::record::{self, RecordView};

use crate::checkpoint::{Checkpoint, TrailerRule};
use crate::config::StoreConfig;

/// The checks applied to every record a scan reads. See the module docs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordCheck {
    /// Check the CRC (the trailer's when there is one, else BODYCRC).
    pub crc: bool,
    /// Records this rule covers must carry the trailer (only with `crc`).
    pub trailer: Option<TrailerRule>,
}

impl RecordCheck {
    /// The CRC alone, as for a log whose writer is unknown.
    pub fn crc_only(crc: bool) -> Self {
        RecordCheck { crc, trailer: None }
    }

    /// What recovery checks: `checkCRCOnRecover` and the checkpoint's rule.
    pub fn for_recovery(config: &StoreConfig, checkpoint: &Checkpoint) -> Self {
        RecordCheck {
            crc: config.check_crc_on_recover,
            trailer: checkpoint.crc_trailer(),
        }
    }

    /// Whether the rule requires `view` (a record that parsed) to carry the
    /// trailer.
    /// Records are told apart by the IP of their STOREHOST: a slave's
    /// copies carry its master's. The port is not compared, and a STOREHOST
    /// that looks torn (port 0, or an address starting with a zero byte:
    /// 0.0.0.0/8, or an IPv6 address whose first group is 0) counts as this
    /// store's: a torn header sector reads as zeros (the soak found records
    /// whose STOREHOST and trailer were both zeroed, partly or wholly, seeds
    /// 10635 and 13583), and that must not exempt the record.
    pub fn requires_trailer(&self, view: &RecordView<'_>) -> bool {
        self.crc
            && self.trailer.is_some_and(|r| {
                view.physical_offset >= r.from
                    && (view.store_host.ip() == r.store_host.ip() || looks_torn(view.store_host))
            })
    }

    /// Why `view` (a record that parsed with `self.crc`) is damaged after
    /// all, if it is: it must carry the trailer and does not.
    pub fn damage(&self, view: &RecordView<'_>) -> Option<String> {
        if !self.requires_trailer(view) {
            return None;
        }
        record::require_crc_trailer(view.bytes).err().map(|e| {
            format!(
                "{e} (this store writes it on every record from offset {})",
                self.trailer.map_or(0, |r| r.from)
            )
        })
    }

    /// Whether the bytes at `at` hold a record that passes every check.
    pub fn passes(&self, raw: &[u8], at: usize) -> bool {
        match RecordView::parse(&raw[at.min(raw.len())..], self.crc) {
            Ok(v) => self.damage(&v).is_none(),
            Err(_) => false,
        }
    }
}

/// Whether a STOREHOST could be a torn one (see
/// [`RecordCheck::requires_trailer`]).
fn looks_torn(host: std::net::SocketAddr) -> bool {
    host.port() == 0
        || match host.ip() {
            std::net::IpAddr::V4(v4) => v4.octets()[0] == 0,
            std::net::IpAddr::V6(v6) => v6.segments()[0] == 0,
        }
}

/// The rule a store opening with `config` after recovering its log to
/// `log_end` writes into its checkpoint: with the trailer on, records from
/// the old rule's start (when the host is the same and the log still
/// reaches it) or from `log_end` on; with it off, none.
pub fn rule_after_open(
    config: &StoreConfig,
    old: Option<TrailerRule>,
    log_end: i64,
) -> Option<TrailerRule> {
    if !config.append_prop_crc {
        return None;
    }
    let from = old
        .filter(|r| r.store_host == config.store_host)
        .map_or(log_end, |r| r.from.min(log_end));
    Some(TrailerRule {
        from,
        store_host: config.store_host,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_common::record::{RecordDraft, seal_crc, stamp};

    fn record(store_host: std::net::SocketAddr, phys: i64, trailer: bool) -> Vec<u8> {
        let d = RecordDraft {
            topic: "T",
            queue_id: 0,
            flag: 0,
            sys_flag: 0,
            born_timestamp: 1,
            born_host: "127.0.0.1:1".parse().unwrap(),
            store_host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: b"hello",
            properties: b"KEYS\x01k\x02",
        };
        let mut out = Vec::new();
        if trailer {
            d.encode_with_crc_trailer(&mut out).unwrap();
        } else {
            d.encode_into(&mut out).unwrap();
        }
        stamp(&mut out, 0, phys, 2);
        if trailer {
            seal_crc(&mut out);
        }
        out
    }

    #[test]
    fn the_rule_covers_own_records_from_its_offset() {
        let me: std::net::SocketAddr = "10.0.0.1:10911".parse().unwrap();
        let master: std::net::SocketAddr = "10.0.0.2:10911".parse().unwrap();
        let check = RecordCheck {
            crc: true,
            trailer: Some(TrailerRule {
                from: 100,
                store_host: me,
            }),
        };
        let judge = |raw: &[u8]| check.damage(&RecordView::parse(raw, true).unwrap());
        // Own record past the rule's start: the trailer must be whole.
        let mut own = record(me, 100, true);
        assert_eq!(judge(&own), None);
        let n = own.len();
        own[n - 15] ^= 1; // inside the key "__CRC32#"
        assert!(judge(&own).unwrap().contains("CRC trailer missing"));
        // Older records, a master's records, and the CRC switched off are
        // not covered.
        assert_eq!(judge(&record(me, 99, false)), None);
        assert_eq!(judge(&record(master, 200, false)), None);
        // A torn STOREHOST (zeros over part of it) is not a master's; the
        // port alone does not tell records apart.
        for torn in [
            "0.0.0.0:0",
            "0.0.0.0:159",
            "10.0.0.1:0",
            "0.0.0.1:10911",
            "10.0.0.1:10752",
        ] {
            let torn: std::net::SocketAddr = torn.parse().unwrap();
            assert!(judge(&record(torn, 200, false)).is_some(), "{torn}");
        }
        let off = RecordCheck {
            crc: false,
            ..check
        };
        assert_eq!(off.damage(&RecordView::parse(&own, false).unwrap()), None);
        assert!(!check.passes(&own, 0));
        assert!(check.passes(&record(me, 100, true), 0));
    }

    #[test]
    fn the_rule_after_open_keeps_its_start_for_the_same_host() {
        let mut cfg = StoreConfig::for_tests("/nowhere");
        let old = TrailerRule {
            from: 50,
            store_host: cfg.store_host,
        };
        assert_eq!(rule_after_open(&cfg, Some(old), 900).unwrap().from, 50);
        assert_eq!(rule_after_open(&cfg, Some(old), 20).unwrap().from, 20);
        assert_eq!(rule_after_open(&cfg, None, 900).unwrap().from, 900);
        let moved = TrailerRule {
            store_host: "10.9.9.9:1".parse().unwrap(),
            ..old
        };
        assert_eq!(rule_after_open(&cfg, Some(moved), 900).unwrap().from, 900);
        cfg.append_prop_crc = false;
        assert_eq!(rule_after_open(&cfg, Some(old), 900), None);
    }
}
