//! Tracing to stderr: `RUST_LOG` sets the verbosity (an `EnvFilter`), else the command's
//! default, which keeps ractor and ractor_cluster one level quieter than our crates (their
//! `info` lines and per-actor spans repeat what membership logs). ractor_cluster is capped at
//! `info` whatever `RUST_LOG` says: at `debug` it logs handshake challenges and digests derived
//! from the cookie.

use tracing::Level;
use tracing_subscriber::filter::{EnvFilter, FilterExt, filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{Layer, fmt};

/// The default filter of `node`: our crates at `info`.
pub const NODE_DEFAULT: &str = "info,ractor=warn,ractor_cluster=warn";
/// The default filter of the other commands (`join`, `status`, `bench`): warnings from
/// our crates, errors from ractor's (a client's session closing is a ractor_cluster warning).
pub const CLIENT_DEFAULT: &str = "warn,ractor=error,ractor_cluster=error";
/// The default filter of `sample`: nothing, unless `RUST_LOG` says otherwise.
pub const QUIET: &str = "off";

/// Installs the subscriber; `default` applies when `RUST_LOG` is unset or invalid.
pub fn init(default: &str) {
    let env = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let cap = filter_fn(|meta| {
        !(meta.target().starts_with("ractor_cluster") && *meta.level() > Level::INFO)
    });
    let layer = fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(env.and(cap));
    // A second call (tests) keeps the first subscriber.
    let _ = tracing_subscriber::registry().with(layer).try_init();
}
