//! VIEW_BROKER_STATS_DATA (315): one of the broker's stats items over the
//! last minute, hour and day, which mqadmin `statsAll` reads for its TPS
//! and 24-hour columns (Java `AdminBrokerProcessor.ViewBrokerStatsData`).

use std::sync::atomic::Ordering;

use basalt_common::time::now_millis;
use basalt_remoting::RemotingCommand;
use basalt_remoting::code::response;
use basalt_remoting::header::{CommandHeader, ViewBrokerStatsDataRequestHeader};
use basalt_remoting::protocol::{BrokerStatsData, BrokerStatsItem};

use super::paths::AdminPath;
use super::{bad_header, error};
use crate::stats_items::StatsFigure;

fn item(f: StatsFigure) -> BrokerStatsItem {
    BrokerStatsItem {
        sum: f.sum,
        tps: if f.tps.is_finite() { f.tps } else { 0.0 },
        avgpt: if f.avgpt.is_finite() { f.avgpt } else { 0.0 },
    }
}

/// Answers the item named by `statsName` and `statsKey`, or, as Java, a
/// SYSTEM_ERROR "The stats <name> <key> not exist" when nothing has been
/// counted under them.
pub fn view_broker_stats_data(a: &AdminPath, req: &RemotingCommand) -> RemotingCommand {
    let h = match ViewBrokerStatsDataRequestHeader::from_ext(&req.ext_fields) {
        Ok(h) => h,
        Err(e) => return bad_header(e),
    };
    let totals = (
        a.stats.put_messages.load(Ordering::Relaxed),
        a.stats.get_messages.load(Ordering::Relaxed),
    );
    let Some([minute, hour, day]) = a.stats.items.view(
        &h.stats_name,
        &h.stats_key,
        &a.config.broker_cluster_name,
        totals,
        now_millis(),
    ) else {
        return error(
            response::SYSTEM_ERROR,
            format!("The stats <{}> <{}> not exist", h.stats_name, h.stats_key),
        );
    };
    let body = BrokerStatsData {
        stats_minute: item(minute),
        stats_hour: item(hour),
        stats_day: item(day),
    };
    RemotingCommand::response(response::SUCCESS, None).with_body(body.encode())
}
