//! Free page reporting on virtual machines. A guest whose virtio-balloon
//! device offers free page reporting hands free memory back to its host, and
//! the next use of that memory takes a host fault. A broker grows its page
//! cache by every byte it stores (CommitLog or ledger files), so until the
//! page cache has filled memory, each new page costs that fault: about 10 µs
//! against 1 µs on the VM measured in docs/hosts.md, where the longest syncs
//! took 97–140 ms against 15–20 ms. The broker cannot avoid it; it says so
//! at start, once, so that an operator can turn reporting off on a VM
//! dedicated to it.
//!
//! Everything here only reads `/sys` and `/proc`, before the runtime starts,
//! and never fails: without a readable balloon device nothing is reported;
//! with one, an order or buddyinfo it cannot read counts as the kernel's
//! default (reported). A check must never keep a broker from starting.

use std::path::Path;

/// The virtio device id of a memory balloon (`/sys/bus/virtio/devices/*/device`).
const VIRTIO_ID_BALLOON: &str = "0x0005";
/// Feature bit of the balloon's free page reporting (VIRTIO_BALLOON_F_REPORTING).
const F_REPORTING: usize = 5;

/// What the host's files say about free page reporting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageReporting {
    /// A balloon device negotiated free page reporting.
    pub balloon_reports: bool,
    /// `page_reporting_order`: blocks of this order and larger are reported.
    pub order: Option<u32>,
    /// The largest order the buddy allocator keeps (from `/proc/buddyinfo`).
    pub largest_order: Option<u32>,
}

impl PageReporting {
    /// Reads the files under `sys` (normally `/sys`) and `proc` (`/proc`).
    pub fn read(sys: &Path, proc: &Path) -> PageReporting {
        PageReporting {
            balloon_reports: balloon_reports(sys),
            order: read_trimmed(&sys.join("module/page_reporting/parameters/page_reporting_order"))
                .and_then(|s| s.parse().ok()),
            largest_order: std::fs::read_to_string(proc.join("buddyinfo"))
                .ok()
                .and_then(|s| largest_order(&s)),
        }
    }

    /// Free memory is handed back to the host: a balloon reports, and some
    /// block the allocator keeps is large enough to be reported (an order
    /// set above the largest one switches reporting off).
    pub fn active(&self) -> bool {
        self.balloon_reports
            && match (self.order, self.largest_order) {
                (Some(order), Some(largest)) => order <= largest,
                _ => true,
            }
    }
}

/// Warns once when free page reporting is active on this host.
pub fn warn_if_active() {
    let r = PageReporting::read(Path::new("/sys"), Path::new("/proc"));
    if r.active() {
        tracing::warn!(
            page_reporting_order = ?r.order,
            "this VM hands free memory back to its host (virtio-balloon free page reporting): \
             every new page-cache page may cost a host fault, which slows writes and syncs until \
             the page cache fills memory; on a VM dedicated to the broker, turn it off (docs/hosts.md)"
        );
    }
}

fn read_trimmed(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// A virtio device with the balloon's id has the reporting feature bit set
/// (`features` is one '0' or '1' per bit, bit 0 first).
fn balloon_reports(sys: &Path) -> bool {
    let Ok(devices) = std::fs::read_dir(sys.join("bus/virtio/devices")) else {
        return false;
    };
    devices.flatten().any(|d| {
        let dir = d.path();
        read_trimmed(&dir.join("device")).as_deref() == Some(VIRTIO_ID_BALLOON)
            && read_trimmed(&dir.join("features"))
                .is_some_and(|f| f.as_bytes().get(F_REPORTING) == Some(&b'1'))
    })
}

/// The largest order in `/proc/buddyinfo`: every line is `Node N, zone NAME`
/// and then one free-block count per order from 0.
fn largest_order(buddyinfo: &str) -> Option<u32> {
    buddyinfo
        .lines()
        .filter_map(|line| {
            let (_, counts) = line.split_once("zone")?;
            let mut fields = counts.split_whitespace();
            fields.next()?; // the zone's name
            let orders = fields.filter(|f| f.parse::<u64>().is_ok()).count();
            (orders > 0).then(|| orders as u32 - 1)
        })
        .max()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BUDDYINFO: &str = "Node 0, zone      DMA      0      0      0      0      0      0      0      0      1      1      3 \n\
                             Node 0, zone   Normal   2452   1924   2148   1752   1094    808    570    392    255    188   1569 \n";

    /// A fake `/sys` and `/proc`: a balloon with `features`, a reporting
    /// order, and buddyinfo.
    fn host(
        features: Option<&str>,
        order: Option<&str>,
        buddyinfo: Option<&str>,
    ) -> tempfile::TempDir {
        let root = tempfile::tempdir().unwrap();
        let sys = root.path().join("sys");
        let net = sys.join("bus/virtio/devices/virtio2");
        std::fs::create_dir_all(&net).unwrap();
        std::fs::write(net.join("device"), "0x0001\n").unwrap();
        std::fs::write(net.join("features"), "11111111\n").unwrap();
        if let Some(f) = features {
            let balloon = sys.join("bus/virtio/devices/virtio0");
            std::fs::create_dir_all(&balloon).unwrap();
            std::fs::write(balloon.join("device"), "0x0005\n").unwrap();
            std::fs::write(balloon.join("features"), f).unwrap();
        }
        if let Some(o) = order {
            let params = sys.join("module/page_reporting/parameters");
            std::fs::create_dir_all(&params).unwrap();
            std::fs::write(params.join("page_reporting_order"), o).unwrap();
        }
        let proc = root.path().join("proc");
        std::fs::create_dir_all(&proc).unwrap();
        if let Some(b) = buddyinfo {
            std::fs::write(proc.join("buddyinfo"), b).unwrap();
        }
        root
    }

    fn read(root: &tempfile::TempDir) -> PageReporting {
        PageReporting::read(&root.path().join("sys"), &root.path().join("proc"))
    }

    /// The VM docs/hosts.md measured: the balloon's bit 5 set, order 9,
    /// orders 0..=10.
    #[test]
    fn a_reporting_balloon_with_a_reportable_order_is_active() {
        let h = host(Some("0110010100000000\n"), Some("9\n"), Some(BUDDYINFO));
        let r = read(&h);
        assert_eq!(
            r,
            PageReporting {
                balloon_reports: true,
                order: Some(9),
                largest_order: Some(10),
            }
        );
        assert!(r.active());
    }

    #[test]
    fn an_order_above_the_largest_switches_it_off() {
        let h = host(Some("0110010100000000\n"), Some("11\n"), Some(BUDDYINFO));
        assert!(!read(&h).active());
        let h = host(Some("0110010100000000\n"), Some("10\n"), Some(BUDDYINFO));
        assert!(read(&h).active(), "order 10 blocks exist and are reported");
    }

    #[test]
    fn no_balloon_or_no_reporting_feature_is_not_active() {
        assert!(!read(&host(None, Some("9"), Some(BUDDYINFO))).active());
        // Stats and deflate-on-OOM, but not bit 5.
        assert!(!read(&host(Some("0110000000"), Some("9"), Some(BUDDYINFO))).active());
        // A features string too short to hold bit 5.
        assert!(!read(&host(Some("011"), Some("9"), Some(BUDDYINFO))).active());
    }

    /// What cannot be read or parsed neither fails nor hides a reporting
    /// balloon: an unknown order counts as reportable.
    #[test]
    fn unreadable_or_garbled_files_are_handled() {
        let h = host(Some("0110010100"), Some("nine"), Some("garbage\nzone\n"));
        let r = read(&h);
        assert_eq!(r.order, None);
        assert_eq!(r.largest_order, None);
        assert!(r.active());
        let empty = tempfile::tempdir().unwrap();
        let r = PageReporting::read(&empty.path().join("sys"), &empty.path().join("proc"));
        assert!(!r.active());
    }

    #[test]
    fn buddyinfo_gives_the_largest_order() {
        assert_eq!(largest_order(BUDDYINFO), Some(10));
        assert_eq!(largest_order("Node 0, zone Normal 1 2 3\n"), Some(2));
        assert_eq!(largest_order(""), None);
    }
}
