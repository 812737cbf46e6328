//! What a send does with a timer property (RocketMQ 5's
//! `HookUtils.checkIfTimerMessage` / `transformTimerMessage`;
//! docs/protocol.md#timer-messages).
//!
//! Four properties ask for a delivery time, in this order of precedence:
//! `TIMER_DELAY_SEC` and `TIMER_DELAY_MS` (relative to the message's arrival),
//! `TIMER_DELIVER_MS` and `__STARTDELIVERTIME` (absolute, ms since the epoch).
//! A time already past makes an ordinary message; a time further out than
//! `timerMaxDelaySec` is refused; any other is rounded to the wheel slot
//! ([`slot_for_delivery`]) and the message goes to the timer topic with
//! `TIMER_OUT_MS`, `REAL_TOPIC` and `REAL_QID`, as a delay level sends it
//! to `SCHEDULE_TOPIC_XXXX`.

use basalt_common::constants::property;
use basalt_common::properties;
use basalt_remoting::code::response;
use basalt_store::timer::slot_for_delivery;

use crate::config::BrokerConfig;

/// The four properties that ask for a delivery time, in precedence order.
pub const TIMER_PROPERTIES: [&str; 4] = [
    property::TIMER_DELAY_SEC,
    property::TIMER_DELAY_MS,
    property::TIMER_DELIVER_MS,
    property::START_DELIVER_TIME,
];

/// What a send does with a message, timer-wise.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerDecision {
    /// No timer property (or a message the timer already delivered).
    NotTimer,
    /// The time asked for is not in the future: an ordinary message.
    DueNow,
    /// Wait in the timer topic until the slot `out_ms` is over.
    Timer { out_ms: i64 },
}

/// Why a timer message is refused: the response code and remark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerRefusal {
    pub code: i32,
    pub remark: String,
}

/// RocketMQ's remark for `WHEEL_TIMER_MSG_ILLEGAL`.
fn illegal(cfg: &BrokerConfig) -> TimerRefusal {
    TimerRefusal {
        code: response::MESSAGE_ILLEGAL,
        remark: format!(
            "timer message illegal, the delay time should not be bigger than the max delay {}ms; or if set del msg, the delay time should be bigger than the current time",
            cfg.timer_max_delay_sec.saturating_mul(1000)
        ),
    }
}

/// The timer properties of one message, read in one pass: what [`decide`]
/// looks at.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimerProperties<'a> {
    /// `TIMER_OUT_MS` is set: a copy the timer already delivered.
    pub delivered: bool,
    /// The first of [`TIMER_PROPERTIES`] present, and its value.
    pub requested: Option<(&'static str, &'a [u8])>,
    /// `TIMER_DEL_UNIQKEY` is set (a cancellation, refused).
    pub cancels: bool,
}

impl<'a> TimerProperties<'a> {
    /// Scans an encoded property string once.
    pub fn scan(props: &'a [u8]) -> Self {
        let [out, sec, ms, deliver, start, del] = properties::find_each(
            props,
            [
                property::TIMER_OUT_MS,
                TIMER_PROPERTIES[0],
                TIMER_PROPERTIES[1],
                TIMER_PROPERTIES[2],
                TIMER_PROPERTIES[3],
                property::TIMER_DEL_UNIQKEY,
            ],
        );
        Self::from_found(out, [sec, ms, deliver, start], del)
    }

    /// Builds the view from values found elsewhere (the send path finds
    /// these names in its own single pass): `requested` holds the values of
    /// [`TIMER_PROPERTIES`], in that order.
    pub fn from_found(
        timer_out_ms: Option<&'a [u8]>,
        requested: [Option<&'a [u8]>; 4],
        del_uniq_key: Option<&'a [u8]>,
    ) -> Self {
        TimerProperties {
            delivered: timer_out_ms.is_some(),
            requested: TIMER_PROPERTIES
                .iter()
                .zip(requested)
                .find_map(|(k, v)| v.map(|v| (*k, v))),
            cancels: del_uniq_key.is_some(),
        }
    }

    /// Whether any of [`TIMER_PROPERTIES`] is present.
    pub fn any_requested(&self) -> bool {
        self.requested.is_some()
    }
}

/// Whether any timer property is present.
pub fn has_timer_property(props: &[u8]) -> bool {
    properties::find_each(props, TIMER_PROPERTIES)
        .iter()
        .any(Option::is_some)
}

/// Removes the timer properties (a delay level wins over them).
pub fn strip_timer_properties(props: &[u8]) -> Vec<u8> {
    properties::without(props, &TIMER_PROPERTIES)
}

/// Decides what a message with these timer properties is, arriving at
/// `now_ms`.
pub fn decide(
    timer: &TimerProperties<'_>,
    now_ms: i64,
    cfg: &BrokerConfig,
) -> Result<TimerDecision, TimerRefusal> {
    // A copy the timer delivered keeps its properties; sent again it is an
    // ordinary message (RocketMQ's "double check").
    if timer.delivered {
        return Ok(TimerDecision::NotTimer);
    }
    let Some((key, raw)) = timer.requested else {
        return Ok(TimerDecision::NotTimer);
    };
    if timer.cancels {
        return Err(TimerRefusal {
            code: response::MESSAGE_ILLEGAL,
            remark:
                "cancelling a timer message (TIMER_DEL_UNIQKEY) is not supported by this broker"
                    .into(),
        });
    }
    if !cfg.timer_wheel_enable {
        return Err(TimerRefusal {
            code: response::SYSTEM_ERROR,
            remark: "accurate timer message is not enabled, timerWheelEnable is false".into(),
        });
    }
    let value = std::str::from_utf8(raw)
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok())
        .ok_or_else(|| illegal(cfg))?;
    let deliver_ms = match key {
        property::TIMER_DELAY_SEC => value.checked_mul(1000).and_then(|d| now_ms.checked_add(d)),
        property::TIMER_DELAY_MS => now_ms.checked_add(value),
        _ => Some(value),
    }
    .ok_or_else(|| illegal(cfg))?;
    if deliver_ms <= now_ms {
        return Ok(TimerDecision::DueNow);
    }
    if deliver_ms - now_ms > cfg.timer_max_delay_sec.saturating_mul(1000) {
        return Err(illegal(cfg));
    }
    Ok(TimerDecision::Timer {
        out_ms: slot_for_delivery(deliver_ms, cfg.timer_precision_ms),
    })
}

/// The properties of a timer message on its way to the timer topic: the
/// decided slot and where it goes when it is due.
pub fn timer_topic_properties(props: &[u8], out_ms: i64, topic: &str, queue_id: i32) -> Vec<u8> {
    let mut out = properties::without(
        props,
        &[
            property::TIMER_OUT_MS,
            property::REAL_TOPIC,
            property::REAL_QID,
        ],
    );
    properties::append(&mut out, property::TIMER_OUT_MS, &out_ms.to_string());
    properties::append(&mut out, property::REAL_TOPIC, topic);
    properties::append(&mut out, property::REAL_QID, &queue_id.to_string());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Vec<u8> {
        let mut v = Vec::new();
        for (k, val) in pairs {
            properties::append(&mut v, k, val);
        }
        v
    }

    const NOW: i64 = 1_700_000_000_300;

    #[test]
    fn each_property_gives_a_rounded_slot() {
        let c = BrokerConfig::default();
        let d = |p: &[(&str, &str)]| decide(&TimerProperties::scan(&props(p)), NOW, &c);
        // +2 s from 300 ms past the second: slot 1_700_000_002_000.
        assert_eq!(
            d(&[("TIMER_DELAY_SEC", "2")]),
            Ok(TimerDecision::Timer {
                out_ms: 1_700_000_002_000
            })
        );
        assert_eq!(
            d(&[("TIMER_DELAY_MS", "1700")]),
            Ok(TimerDecision::Timer {
                out_ms: 1_700_000_001_000
            })
        );
        // On a boundary: the slot before it, which is over at that time.
        assert_eq!(
            d(&[("TIMER_DELIVER_MS", "1700000010000")]),
            Ok(TimerDecision::Timer {
                out_ms: 1_700_000_009_000
            })
        );
        assert_eq!(
            d(&[("__STARTDELIVERTIME", "1700000010001")]),
            Ok(TimerDecision::Timer {
                out_ms: 1_700_000_010_000
            })
        );
        // Precedence: DELAY_SEC, DELAY_MS, DELIVER_MS, __STARTDELIVERTIME.
        assert_eq!(
            d(&[("TIMER_DELIVER_MS", "1"), ("TIMER_DELAY_SEC", "5")]),
            Ok(TimerDecision::Timer {
                out_ms: 1_700_000_005_000
            })
        );
    }

    #[test]
    fn past_times_are_ordinary_and_too_far_is_refused() {
        let c = BrokerConfig::default();
        let d = |p: &[(&str, &str)]| decide(&TimerProperties::scan(&props(p)), NOW, &c);
        assert_eq!(d(&[]), Ok(TimerDecision::NotTimer));
        assert_eq!(d(&[("TIMER_DELIVER_MS", "5")]), Ok(TimerDecision::DueNow));
        assert_eq!(d(&[("TIMER_DELAY_SEC", "-3")]), Ok(TimerDecision::DueNow));
        assert_eq!(d(&[("TIMER_DELAY_MS", "0")]), Ok(TimerDecision::DueNow));
        let max = 3 * 86_400;
        assert!(matches!(
            d(&[("TIMER_DELAY_SEC", &max.to_string())]),
            Ok(TimerDecision::Timer { .. })
        ));
        let e = d(&[("TIMER_DELAY_SEC", &(max + 1).to_string())]).unwrap_err();
        assert_eq!(e.code, response::MESSAGE_ILLEGAL);
        assert!(e.remark.contains("259200000ms"), "{}", e.remark);
        assert!(d(&[("TIMER_DELAY_MS", "soon")]).is_err());
        assert!(d(&[("TIMER_DELAY_SEC", &i64::MAX.to_string())]).is_err());
        // A delivered copy sent again is not a timer.
        assert_eq!(
            d(&[("TIMER_DELAY_SEC", "5"), ("TIMER_OUT_MS", "1")]),
            Ok(TimerDecision::NotTimer)
        );
        assert!(d(&[("TIMER_DELAY_SEC", "5"), ("TIMER_DEL_UNIQKEY", "x")]).is_err());
        let off = BrokerConfig {
            timer_wheel_enable: false,
            ..BrokerConfig::default()
        };
        let e = decide(
            &TimerProperties::scan(&props(&[("TIMER_DELAY_SEC", "5")])),
            NOW,
            &off,
        )
        .unwrap_err();
        assert_eq!(e.code, response::SYSTEM_ERROR);
    }

    #[test]
    fn rerouted_properties_name_the_real_queue() {
        let p = timer_topic_properties(&props(&[("TAGS", "a")]), 42, "Orders", 3);
        assert_eq!(properties::find(&p, "TIMER_OUT_MS"), Some(&b"42"[..]));
        assert_eq!(properties::find(&p, "REAL_TOPIC"), Some(&b"Orders"[..]));
        assert_eq!(properties::find(&p, "REAL_QID"), Some(&b"3"[..]));
        assert_eq!(properties::find(&p, "TAGS"), Some(&b"a"[..]));
        assert!(!has_timer_property(&p));
        assert!(has_timer_property(&props(&[("__STARTDELIVERTIME", "1")])));
        assert!(strip_timer_properties(&props(&[("TIMER_DELAY_SEC", "1")])).is_empty());
    }
}
