//! Logging what unauthenticated peers do without letting them write our logs: their text
//! escaped and cut ([`peer_text`]), and lines about them rate-limited ([`LogLimit`]).

use std::fmt::Write as _;
use std::time::Duration;

use tokio::time::Instant;

/// Most characters of a peer's text that reach a log line (after escaping).
pub const MAX_LOGGED_CHARS: usize = 64;

/// Text a peer sent before authenticating, fit for a log line: in quotes, every byte that is
/// not printable ASCII (and `"` and `\`) escaped as Rust does (`\n`, `\x00`), cut to
/// [`MAX_LOGGED_CHARS`] characters, with the length of the whole when it was cut.
///
/// Everything a peer sends before it has proven the cookie goes through here on its way to
/// a log line.
pub fn peer_text(bytes: impl AsRef<[u8]>) -> String {
    let bytes = bytes.as_ref();
    let mut out = String::with_capacity(MAX_LOGGED_CHARS + 24);
    out.push('"');
    let mut shown = 0;
    let mut cut = false;
    for byte in bytes {
        let escaped = std::ascii::escape_default(*byte);
        if shown + escaped.len() > MAX_LOGGED_CHARS {
            cut = true;
            break;
        }
        shown += escaped.len();
        out.extend(escaped.map(char::from));
    }
    out.push('"');
    if cut {
        let _ = write!(out, "... ({} bytes)", bytes.len());
    }
    out
}

/// At most `per_second` lines a second of one kind; the next line allowed after a quiet spell
/// says how many were held back.
#[derive(Debug)]
pub(crate) struct LogLimit {
    per_second: u32,
    window: Option<Instant>,
    in_window: u32,
    suppressed: u64,
}

impl LogLimit {
    pub(crate) fn new(per_second: u32) -> Self {
        Self {
            per_second,
            window: None,
            in_window: 0,
            suppressed: 0,
        }
    }

    /// Whether a line may be logged at `now`: `Some(n)`, with `n` the lines held back since
    /// the last one logged, or `None` (the line is counted as held back).
    pub(crate) fn allow(&mut self, now: Instant) -> Option<u64> {
        let fresh = self
            .window
            .is_none_or(|start| now.duration_since(start) >= Duration::from_secs(1));
        if fresh {
            self.window = Some(now);
            self.in_window = 0;
        }
        if self.in_window < self.per_second {
            self.in_window += 1;
            Some(std::mem::take(&mut self.suppressed))
        } else {
            self.suppressed += 1;
            None
        }
    }
}

/// `" (N similar lines held back)"`, or nothing for 0.
pub(crate) fn held_back(suppressed: u64) -> String {
    if suppressed == 0 {
        String::new()
    } else {
        format!(" ({suppressed} similar lines held back)")
    }
}
