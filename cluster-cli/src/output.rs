//! Printing that a closed pipe does not break: `out!`, `outln!` (stdout), `errln!` (stderr)
//! in place of `print!`, `println!` and `eprintln!`, which panic when the reader has gone
//! (`cluster-cli sample ... | head`). Once a stream's reader is gone, what is printed to it
//! is dropped and the command carries on (its output files are still written) and exits as
//! it would have: 0 when it succeeds, quietly. Any other write error (a full disk) is kept
//! and ends the command with an error (`failure`).

use std::fmt;
use std::io::{self, ErrorKind, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The reader of stdout (or stderr) is gone: drop what is printed to it.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);
static STDERR_CLOSED: AtomicBool = AtomicBool::new(false);
/// The first error writing stdout other than a closed pipe.
static STDOUT_ERROR: Mutex<Option<String>> = Mutex::new(None);

/// Prints to stdout (see the module's comment).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::stdout(format_args!($($arg)*))
    };
}

/// Prints a line to stdout (see the module's comment).
macro_rules! outln {
    () => {
        $crate::output::stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::output::stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Prints a line to stderr (see the module's comment).
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Writes to stdout; see [`out!`].
pub fn stdout(args: fmt::Arguments<'_>) {
    if STDOUT_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stream = io::stdout().lock();
    if let Err(error) = stream.write_fmt(args).and_then(|()| stream.flush()) {
        STDOUT_CLOSED.store(true, Ordering::Relaxed);
        if error.kind() != ErrorKind::BrokenPipe
            && let Ok(mut first) = STDOUT_ERROR.lock()
        {
            first.get_or_insert_with(|| error.to_string());
        }
    }
}

/// Writes to stderr; see [`errln!`]. A failure there has nowhere to be reported.
pub fn stderr(args: fmt::Arguments<'_>) {
    if STDERR_CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut stream = io::stderr().lock();
    if stream
        .write_fmt(args)
        .and_then(|()| stream.flush())
        .is_err()
    {
        STDERR_CLOSED.store(true, Ordering::Relaxed);
    }
}

/// Why stdout could not be written, other than its reader going away.
pub fn failure() -> Option<String> {
    STDOUT_ERROR.lock().ok()?.clone()
}
