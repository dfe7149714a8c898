//! The cluster cookie: the shared secret nodes prove to each other when they connect.
//!
//! [`Cookie`] never shows its value: `Debug` and `Display` print `<redacted>`, so logging a
//! settings struct that holds one is safe. The value leaves this type only towards
//! ractor_cluster's `NodeServer` ([`Cookie::reveal`], crate-private). Where the cookie comes
//! from (flag, environment, file) is `cluster-cli`'s business.
//!
//! The cookie authenticates membership; it does not encrypt traffic: without TLS
//! (`transport/tls.rs`), run clusters on a private network.

use std::fmt;

/// The longest cookie accepted, in bytes.
pub const MAX_COOKIE_LEN: usize = 1024;

/// A cluster cookie. Every node of a cluster must use the same one.
#[derive(Clone, PartialEq, Eq)]
pub struct Cookie(String);

/// A string that cannot be a cookie. Never contains the rejected value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CookieError {
    /// Empty (after trimming surrounding whitespace).
    #[error("the cookie is empty")]
    Empty,
    /// Longer than [`MAX_COOKIE_LEN`].
    #[error("the cookie is {len} bytes long; the limit is {MAX_COOKIE_LEN}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// Has whitespace or control characters inside it.
    #[error("the cookie contains whitespace or control characters")]
    BadCharacter,
}

impl Cookie {
    /// Checks and wraps a cookie; surrounding whitespace (a file's final newline) is dropped.
    pub fn new(value: &str) -> Result<Self, CookieError> {
        let value = value.trim();
        if value.is_empty() {
            return Err(CookieError::Empty);
        }
        if value.len() > MAX_COOKIE_LEN {
            return Err(CookieError::TooLong { len: value.len() });
        }
        if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(CookieError::BadCharacter);
        }
        Ok(Self(value.to_owned()))
    }

    /// The secret itself, for ractor_cluster's handshake only.
    pub(crate) fn reveal(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Cookie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Cookie(<redacted>)")
    }
}

impl fmt::Display for Cookie {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests;
