//! A live progress line for `basalt produce -n` and `basalt consume -n`:
//! `sent 1200/10000 (12%) 830 msg/s`, redrawn in place on stderr a few
//! times a second. Drawn only when stderr is a terminal, and not when the
//! tool prints a line per message to the same terminal or prints `--json`;
//! otherwise nothing extra is written.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

/// Redraws at most this often.
const REDRAW: Duration = Duration::from_millis(100);

/// Whether a progress line may be drawn: stderr is a terminal, no JSON is
/// asked for, and no per-message lines go to a terminal on stdout.
pub fn wanted(json: bool, prints_lines: bool) -> bool {
    std::io::stderr().is_terminal() && !json && !(prints_lines && std::io::stdout().is_terminal())
}

/// One progress line: what is counted, out of how many, since when.
pub struct ProgressLine {
    enabled: bool,
    verb: &'static str,
    total: u64,
    started: Instant,
    drawn: Option<Instant>,
}

impl ProgressLine {
    /// `total` 0 means open-ended (no percentage).
    pub fn new(enabled: bool, verb: &'static str, total: u64) -> ProgressLine {
        ProgressLine {
            enabled,
            verb,
            total,
            started: Instant::now(),
            drawn: None,
        }
    }

    /// Redraws with `done` if the last draw is old enough (or `done` is the total).
    pub fn update(&mut self, done: u64) {
        if self.due(done) {
            self.draw(done);
        }
    }

    /// Whether `done` is to be drawn now; if so, records the draw.
    fn due(&mut self, done: u64) -> bool {
        if !self.enabled {
            return false;
        }
        let now = Instant::now();
        let stale = self.drawn.is_none_or(|t| now - t >= REDRAW);
        if stale || (self.total > 0 && done >= self.total) {
            self.drawn = Some(now);
            return true;
        }
        false
    }

    fn draw(&self, done: u64) {
        let secs = self.started.elapsed().as_secs_f64().max(1e-3);
        let rate = done as f64 / secs;
        let text = match done.saturating_mul(100).checked_div(self.total) {
            Some(pct) => format!(
                "{} {done}/{} ({pct}%) {rate:.0} msg/s",
                self.verb, self.total
            ),
            None => format!("{} {done} {rate:.0} msg/s", self.verb),
        };
        let mut err = std::io::stderr().lock();
        // \r and "erase line": the next draw replaces this one.
        let _ = write!(err, "\r\x1b[2K{text}");
        let _ = err.flush();
    }

    /// Draws `done` a last time and ends the line, so what follows starts
    /// on a line of its own.
    pub fn finish(&mut self, done: u64) {
        if self.enabled {
            self.draw(done);
            eprintln!();
            self.enabled = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disabled_line_stays_disabled() {
        let mut p = ProgressLine::new(false, "sent", 10);
        p.update(5);
        p.finish(10);
        assert!(p.drawn.is_none());
    }

    #[test]
    fn redraws_are_rate_limited_but_the_last_is_drawn() {
        let mut p = ProgressLine::new(true, "sent", 3);
        assert!(p.due(1), "the first count is drawn");
        assert!(!p.due(2), "redrawn within {REDRAW:?}");
        assert!(p.due(3), "the total is always drawn");
    }
}
