//! What the send path reads from a message's properties, found in one pass.
//!
//! A single send used to look up about fifteen names one `find` at a time
//! (transaction, delay level, four timer properties, `WAIT`, ...), each
//! scanning the whole property string: a quarter of the broker's
//! user-space instructions per message (docs/benchmarks.md, "Before and
//! after the broker reshaping").

use basalt_common::constants::property;
use basalt_common::properties;

use crate::schedule::timers::admission::{TIMER_PROPERTIES, TimerProperties};

/// The properties of one send that decide where it is stored and whether
/// its producer waits, read from the client's property string.
#[derive(Debug, Clone, Copy)]
pub(super) struct SendProperties<'a> {
    wait: Option<&'a [u8]>,
    tran_msg: Option<&'a [u8]>,
    delay: Option<&'a [u8]>,
    pub timer: TimerProperties<'a>,
}

impl<'a> SendProperties<'a> {
    /// Scans the client's property string once.
    pub fn scan(raw: &'a [u8]) -> Self {
        let [wait, tran_msg, delay, out, sec, ms, deliver, start, del] = properties::find_each(
            raw,
            [
                property::WAIT,
                property::TRAN_MSG,
                property::DELAY,
                property::TIMER_OUT_MS,
                TIMER_PROPERTIES[0],
                TIMER_PROPERTIES[1],
                TIMER_PROPERTIES[2],
                TIMER_PROPERTIES[3],
                property::TIMER_DEL_UNIQKEY,
            ],
        );
        SendProperties {
            wait,
            tran_msg,
            delay,
            timer: TimerProperties::from_found(out, [sec, ms, deliver, start], del),
        }
    }

    /// The delay level asked for (`DELAY`), 0 when none or unreadable.
    pub fn delay_level(&self) -> i32 {
        self.delay
            .and_then(|v| std::str::from_utf8(v).ok())
            .and_then(|v| v.trim().parse::<i32>().ok())
            .unwrap_or(0)
    }

    /// Whether the producer waits for durability (`WAIT`, default true).
    pub fn wait_store_msg_ok(&self) -> bool {
        wait_value_ok(self.wait)
    }

    /// Whether the send is a transaction's half message: `TRAN_MSG=true`,
    /// except (as RocketMQ does for clients before 4.6.1) a retried message
    /// that names a delay level.
    pub fn is_half_message(&self, reconsume_times: i32) -> bool {
        let tran = self
            .tran_msg
            .is_some_and(|v| v.eq_ignore_ascii_case(b"true"));
        tran && !(reconsume_times > 0 && self.delay_level() > 0)
    }
}

/// `WAIT`'s meaning: anything but "false" (any case) waits; absent waits.
pub(super) fn wait_value_ok(wait: Option<&[u8]>) -> bool {
    wait.map(|v| !v.eq_ignore_ascii_case(b"false"))
        .unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use basalt_common::properties::Properties;

    fn props(pairs: &[(&str, &str)]) -> Vec<u8> {
        pairs.iter().copied().collect::<Properties>().encode()
    }

    #[test]
    fn reads_what_the_send_path_needs() {
        let raw = props(&[
            ("WAIT", "False"),
            ("TRAN_MSG", "true"),
            ("DELAY", " 3 "),
            ("TIMER_DELIVER_MS", "99"),
            ("__STARTDELIVERTIME", "7"),
        ]);
        let s = SendProperties::scan(&raw);
        assert!(!s.wait_store_msg_ok());
        assert_eq!(s.delay_level(), 3);
        assert!(s.is_half_message(0));
        assert!(
            !s.is_half_message(1),
            "a retried message with a delay level is not a half"
        );
        // Precedence follows TIMER_PROPERTIES, not the order in the string.
        assert_eq!(s.timer.requested, Some(("TIMER_DELIVER_MS", &b"99"[..])));
        assert!(!s.timer.delivered && !s.timer.cancels);
    }

    #[test]
    fn defaults_when_absent_or_unreadable() {
        let raw = props(&[("DELAY", "x"), ("TRAN_MSG", "yes")]);
        let s = SendProperties::scan(&raw);
        assert!(s.wait_store_msg_ok());
        assert_eq!(s.delay_level(), 0);
        assert!(!s.is_half_message(0));
        assert_eq!(s.timer, TimerProperties::default());
        assert_eq!(SendProperties::scan(b"").delay_level(), 0);
    }

    #[test]
    fn timer_view_matches_its_own_scan() {
        for pairs in [
            vec![("TIMER_DELAY_SEC", "5"), ("TIMER_DELAY_MS", "10")],
            vec![("TIMER_OUT_MS", "1"), ("TIMER_DELAY_MS", "10")],
            vec![("TIMER_DEL_UNIQKEY", "k"), ("__STARTDELIVERTIME", "10")],
            vec![("TAGS", "a")],
        ] {
            let raw = props(&pairs);
            assert_eq!(
                SendProperties::scan(&raw).timer,
                TimerProperties::scan(&raw)
            );
        }
    }
}
