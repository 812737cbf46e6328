//! Rates and daily marks for GET_BROKER_RUNTIME_INFO (Java
//! `StoreStatsService` sampling and `BrokerStats` morning marks): a task
//! samples the broker's counters once a second; rates are taken over the
//! last 10, 60 and 600 s of samples.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use parking_lot::Mutex;

use crate::processor::paths::BrokerStats;

/// Samples kept: ten minutes at one a second, plus the one the oldest
/// window starts from.
const MAX_SAMPLES: usize = 601;
const DAY_MS: i64 = 86_400_000;

/// One reading of the counters.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    at_ms: i64,
    put: u64,
    get_found: u64,
    get_miss: u64,
}

/// The counters at the start of today and of yesterday (UTC midnights
/// seen by this process; 0 before the first midnight, as in Java).
#[derive(Debug, Clone, Copy, Default)]
struct DayMarks {
    day: i64,
    put_today: u64,
    put_yesterday: u64,
    get_today: u64,
    get_yesterday: u64,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub struct RateSampler {
    samples: Mutex<VecDeque<Sample>>,
    marks: Mutex<DayMarks>,
}

impl RateSampler {
    /// Records the counters as of `now_ms`, and moves the morning marks
    /// when a UTC day has begun since the last sample.
    pub fn record(&self, stats: &BrokerStats, now_ms: i64) {
        let s = Sample {
            at_ms: now_ms,
            put: stats.put_messages.load(Ordering::Relaxed),
            get_found: stats.get_messages.load(Ordering::Relaxed),
            get_miss: stats.get_misses.load(Ordering::Relaxed),
        };
        {
            let mut q = self.samples.lock();
            q.push_back(s);
            while q.len() > MAX_SAMPLES {
                q.pop_front();
            }
        }
        let day = now_ms.div_euclid(DAY_MS);
        let mut m = self.marks.lock();
        if m.day == 0 {
            m.day = day;
        } else if day != m.day {
            m.day = day;
            m.put_yesterday = m.put_today;
            m.get_yesterday = m.get_today;
            m.put_today = s.put;
            m.get_today = s.get_found;
        }
    }

    /// Per-second rates (put, found, miss) over the last `secs` seconds of
    /// samples (fewer right after start); zeros with fewer than two.
    fn rates(&self, secs: i64) -> (f64, f64, f64) {
        let q = self.samples.lock();
        let Some(last) = q.back().copied() else {
            return (0.0, 0.0, 0.0);
        };
        let first = q
            .iter()
            .find(|s| s.at_ms >= last.at_ms - secs * 1000)
            .copied()
            .unwrap_or(last);
        let span = (last.at_ms - first.at_ms) as f64 / 1000.0;
        if span <= 0.0 {
            return (0.0, 0.0, 0.0);
        }
        let rate = |a: u64, b: u64| a.saturating_sub(b) as f64 / span;
        (
            rate(last.put, first.put),
            rate(last.get_found, first.get_found),
            rate(last.get_miss, first.get_miss),
        )
    }

    /// The runtime-info keys this sampler answers: `putTps`,
    /// `getFoundTps`, `getMissTps`, `getTotalTps`, `getTransferedTps` (and
    /// 5.x's `getTransferredTps`), each "10s 60s 600s"; the morning marks.
    pub fn runtime_info(&self) -> Vec<(String, String)> {
        let windows = [10, 60, 600].map(|w| self.rates(w));
        let fmt = |f: &dyn Fn(&(f64, f64, f64)) -> f64| {
            windows
                .iter()
                .map(|r| format!("{:.2}", f(r)))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let put = fmt(&|r| r.0);
        let found = fmt(&|r| r.1);
        let miss = fmt(&|r| r.2);
        let total = fmt(&|r| r.1 + r.2);
        let m = *self.marks.lock();
        vec![
            ("putTps".into(), put),
            ("getFoundTps".into(), found.clone()),
            ("getTransferedTps".into(), found.clone()),
            ("getTransferredTps".into(), found),
            ("getMissTps".into(), miss),
            ("getTotalTps".into(), total),
            ("msgPutTotalTodayMorning".into(), m.put_today.to_string()),
            (
                "msgPutTotalYesterdayMorning".into(),
                m.put_yesterday.to_string(),
            ),
            ("msgGetTotalTodayMorning".into(), m.get_today.to_string()),
            (
                "msgGetTotalYesterdayMorning".into(),
                m.get_yesterday.to_string(),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(put: u64, get: u64, miss: u64) -> BrokerStats {
        let s = BrokerStats::default();
        s.put_messages.store(put, Ordering::Relaxed);
        s.get_messages.store(get, Ordering::Relaxed);
        s.get_misses.store(miss, Ordering::Relaxed);
        s
    }

    fn get<'a>(info: &'a [(String, String)], k: &str) -> &'a str {
        &info.iter().find(|(key, _)| key == k).unwrap().1
    }

    #[test]
    fn rates_come_from_samples_over_each_window() {
        let r = RateSampler::default();
        let t0 = 5 * DAY_MS + 1000;
        // 100 puts a second for 60 s, then 10 a second for 10 s.
        for i in 0..=60 {
            r.record(&stats(100 * i, 50 * i, 2 * i), t0 + i as i64 * 1000);
        }
        for i in 1..=10 {
            r.record(
                &stats(6000 + 10 * i, 3000, 120),
                t0 + (60 + i) as i64 * 1000,
            );
        }
        let info = r.runtime_info();
        let put: Vec<f64> = get(&info, "putTps")
            .split(' ')
            .map(|v| v.parse().unwrap())
            .collect();
        assert_eq!(put[0], 10.0);
        assert!(put[1] > 10.0 && put[1] < 100.0, "{put:?}");
        assert_eq!(get(&info, "getMissTps").split(' ').next(), Some("0.00"));
        assert_eq!(get(&info, "msgPutTotalTodayMorning"), "0");
    }

    #[test]
    fn morning_marks_move_at_midnight() {
        let r = RateSampler::default();
        r.record(&stats(10, 5, 0), 3 * DAY_MS + 10);
        r.record(&stats(20, 8, 0), 4 * DAY_MS + 10);
        r.record(&stats(30, 9, 0), 5 * DAY_MS + 10);
        let info = r.runtime_info();
        assert_eq!(get(&info, "msgPutTotalTodayMorning"), "30");
        assert_eq!(get(&info, "msgPutTotalYesterdayMorning"), "20");
        assert_eq!(get(&info, "msgGetTotalTodayMorning"), "9");
        assert_eq!(get(&info, "msgGetTotalYesterdayMorning"), "8");
    }
}
