//! The open-file limit. Every connection is a file descriptor, so the
//! connection caps mean little under a soft limit of 1024. At start the
//! soft limit is raised to the hard one (as the JVM does for RocketMQ), and
//! a server whose caps cannot fit under it says so.

/// Descriptors kept for everything but client connections: store files,
/// connections to NameServers and peers, the listeners, logs.
pub const RESERVED_FDS: u64 = 1024;

/// Raises the soft RLIMIT_NOFILE to the hard limit and returns the limit in
/// force (`None` when it cannot be read or is unlimited).
pub fn raise_to_hard() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes one rlimit into the struct we own.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
            return None;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            // SAFETY: setrlimit reads the struct we own.
            if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
                lim.rlim_cur = lim.rlim_max;
            }
        }
        (lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur)
    }
    #[cfg(not(unix))]
    None
}

/// Warns when `max_connections` (summed over the servers of this process)
/// does not fit under the open-file limit: accepts would then fail with
/// "Too many open files" before the cap is reached (they are retried, so
/// the server keeps running, but the cap is not what bounds it).
pub fn warn_if_caps_exceed(max_connections: usize, limit: Option<u64>) {
    let Some(limit) = limit else { return };
    let wanted = max_connections as u64 + RESERVED_FDS;
    if wanted > limit {
        tracing::warn!(
            max_connections,
            open_file_limit = limit,
            "connection caps exceed the open-file limit; raise `ulimit -n` or lower serverMaxConnections"
        );
    } else {
        tracing::info!(max_connections, open_file_limit = limit, "connection caps");
    }
}
