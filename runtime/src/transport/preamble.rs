//! The preamble: the first bytes of every cluster connection, before ractor_cluster's cookie
//! handshake. The dialling side sends a [`Hello`] (who it is, which preamble version it
//! speaks); the accepting side answers one [`Status`] (go on, or why not) and, unless it is
//! [`Status::Ok`], closes the connection.
//!
//! With TLS the preamble runs inside the TLS session. The accepting side tells a TLS dialler
//! from a plaintext one by the first byte (a TLS record starts with `0x16`, a hello with
//! [`MAGIC`]); a status that refuses a connection before or instead of TLS (busy, throttled,
//! TLS required, TLS unsupported) goes out in plaintext, and the dialler recognises it by its
//! magic bytes.
//!
//! Layout (integers big-endian; frozen: a later version may add status codes, never move
//! these fields):
//!
//! ```text
//! hello   MAGIC[4] version:u16 incarnation:u64 name_len:u8 name[name_len]
//! link    LINK_MAGIC[4] version:u16 job:u64 token[32]
//! status  MAGIC[4] version:u16 code:u8 payload_len:u16 payload[payload_len]
//! ```
//!
//! A link hello opens a job link (`crate::link`) instead of a cluster session: the same
//! listener, TLS and admission, then the token the job's coordinator issued in place of the
//! cookie handshake.
//!
//! Parsing is pure, bounded (a hello is at most [`MAX_HELLO_BYTES`], a status at most
//! [`MAX_STATUS_BYTES`]) and incremental: given the bytes so far it answers "need more",
//! a value, or an error.

use std::time::Duration;

use crate::ids::NodeName;

/// The first bytes of a hello and of a status. Never `0x16` first (a TLS handshake record).
pub const MAGIC: [u8; 4] = *b"BYCL";

/// The first bytes of a link hello (never `0x16` first, and not [`MAGIC`]).
pub const LINK_MAGIC: [u8; 4] = *b"BYLK";

/// Bytes of a link's token.
pub const LINK_TOKEN_BYTES: usize = 32;

/// Bytes of a link hello.
pub const LINK_HELLO_BYTES: usize = 4 + 2 + 8 + LINK_TOKEN_BYTES;

/// The preamble version this build speaks.
pub const VERSION: u16 = 1;

/// Longest node name (or other text field) in a preamble, in bytes.
pub const MAX_TEXT_BYTES: usize = u8::MAX as usize;

/// Largest hello: the fixed part and the longest name.
pub const MAX_HELLO_BYTES: usize = HELLO_FIXED + MAX_TEXT_BYTES;

/// Largest status payload accepted.
pub const MAX_STATUS_PAYLOAD: usize = 2 * (1 + MAX_TEXT_BYTES) + 16;

/// Largest status: the header and the largest payload.
pub const MAX_STATUS_BYTES: usize = STATUS_HEADER + MAX_STATUS_PAYLOAD;

const HELLO_FIXED: usize = 4 + 2 + 8 + 1;
const STATUS_HEADER: usize = 4 + 2 + 1 + 2;

/// What the dialling side says first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hello {
    /// The dialler's preamble version.
    pub version: u16,
    /// A number the dialler's process chose at start: two processes with the same node name
    /// have different ones, so a reconnect of a live node is told from an impostor.
    pub incarnation: u64,
    /// The dialler's full node name (printable ASCII, at most [`MAX_TEXT_BYTES`]).
    pub name: Vec<u8>,
}

/// What a client says first on a job link: the job and the token its coordinator issued.
#[derive(Clone, PartialEq, Eq)]
pub struct LinkHello {
    /// The dialler's preamble version.
    pub version: u16,
    /// The job (`JobId`'s number).
    pub job: u64,
    /// The token (a secret: not printed).
    pub token: [u8; LINK_TOKEN_BYTES],
}

impl std::fmt::Debug for LinkHello {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkHello")
            .field("version", &self.version)
            .field("job", &self.job)
            .finish_non_exhaustive()
    }
}

impl LinkHello {
    /// The hello's bytes.
    pub fn encode(&self) -> [u8; LINK_HELLO_BYTES] {
        let mut out = [0u8; LINK_HELLO_BYTES];
        out[..4].copy_from_slice(&LINK_MAGIC);
        out[4..6].copy_from_slice(&self.version.to_be_bytes());
        out[6..14].copy_from_slice(&self.job.to_be_bytes());
        out[14..].copy_from_slice(&self.token);
        out
    }

    /// Parses a link hello: `Ok(None)` until [`LINK_HELLO_BYTES`] are there; a version other
    /// than [`VERSION`] is an error as soon as it is read.
    pub fn parse(bytes: &[u8]) -> Result<Option<Self>, PreambleError> {
        let n = bytes.len().min(4);
        if bytes[..n] != LINK_MAGIC[..n] {
            return Err(PreambleError::BadMagic {
                first: bytes[..n].to_vec(),
                tls: bytes.first() == Some(&0x16),
            });
        }
        if bytes.len() < 6 {
            return Ok(None);
        }
        let version = u16::from_be_bytes([bytes[4], bytes[5]]);
        if version != VERSION {
            return Err(PreambleError::Version { theirs: version });
        }
        let Some(rest) = bytes.get(6..LINK_HELLO_BYTES) else {
            return Ok(None);
        };
        Ok(Some(Self {
            version,
            job: u64::from_be_bytes(rest[..8].try_into().expect("8 bytes")),
            token: rest[8..].try_into().expect("token bytes"),
        }))
    }
}

/// Which connection cap refused a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusyScope {
    /// Unauthenticated connections to the node, from anywhere.
    Node,
    /// Unauthenticated connections to the node from the dialler's address.
    Address,
}

/// What the accepting side answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Status {
    /// Go on: ractor_cluster's cookie handshake follows. Names the accepting node.
    Ok {
        /// The accepting process's incarnation.
        incarnation: u64,
        /// The accepting node's full name.
        name: Vec<u8>,
    },
    /// Another live process already uses the dialler's node name.
    NameInUse {
        /// The name.
        name: Vec<u8>,
        /// Where that process is connected from (an address, or "this node").
        connected_from: Vec<u8>,
    },
    /// Too many connections are waiting to authenticate.
    Busy {
        /// Which cap.
        scope: BusyScope,
        /// Its value.
        limit: u32,
    },
    /// Too many failed handshakes came from the dialler's address lately.
    Throttled {
        /// How long before the node accepts a connection from that address again.
        retry_after: Duration,
        /// Failed handshakes counted against the address.
        failures: u32,
    },
    /// The node runs TLS and the dialler spoke plaintext.
    TlsRequired,
    /// The node runs without TLS and the dialler started a TLS handshake.
    TlsUnsupported,
    /// The node speaks another preamble version (the status header's `version`).
    VersionMismatch,
    /// The hello did not parse (its name is not a valid node name).
    BadHello,
    /// A link hello whose job has no link with that token here (the job is unknown, gone, or
    /// the token wrong).
    UnknownLink,
}

/// A status with the version it came with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The accepting side's preamble version.
    pub version: u16,
    /// Its answer.
    pub status: Status,
}

/// Bytes that are not a valid preamble.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PreambleError {
    /// The first bytes are not [`MAGIC`] (and, with `tls`, they start a TLS record).
    #[error("not a cluster hello (first bytes {first:02x?})")]
    BadMagic {
        /// Up to four first bytes.
        first: Vec<u8>,
        /// The first byte is `0x16`, a TLS handshake record.
        tls: bool,
    },
    /// The peer speaks another version; the rest is not read.
    #[error("preamble version {theirs} (this node speaks {VERSION})")]
    Version {
        /// The peer's version.
        theirs: u16,
    },
    /// A status code this version does not know.
    #[error("unknown status code {code}")]
    UnknownCode {
        /// The code.
        code: u8,
    },
    /// A status payload over [`MAX_STATUS_PAYLOAD`] or shorter than its code needs.
    #[error("malformed status (code {code}, payload of {len} bytes)")]
    BadPayload {
        /// The code.
        code: u8,
        /// The payload's length.
        len: usize,
    },
}

impl Hello {
    /// A hello from `name` in this version.
    pub fn new(name: &NodeName, incarnation: u64) -> Self {
        Self {
            version: VERSION,
            incarnation,
            name: name.as_str().as_bytes().to_vec(),
        }
    }

    /// The hello's bytes. A name over [`MAX_TEXT_BYTES`] is cut (node names are shorter).
    pub fn encode(&self) -> Vec<u8> {
        let name = &self.name[..self.name.len().min(MAX_TEXT_BYTES)];
        let mut out = Vec::with_capacity(HELLO_FIXED + name.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&self.version.to_be_bytes());
        out.extend_from_slice(&self.incarnation.to_be_bytes());
        out.push(name.len() as u8);
        out.extend_from_slice(name);
        out
    }

    /// Parses a hello from the start of `bytes`: `Ok(None)` until enough bytes are there,
    /// then the hello and how many bytes it took. A version other than [`VERSION`] is an
    /// error as soon as the version is read.
    pub fn parse(bytes: &[u8]) -> Result<Option<(Self, usize)>, PreambleError> {
        let Some(version) = header(bytes)? else {
            return Ok(None);
        };
        if version != VERSION {
            return Err(PreambleError::Version { theirs: version });
        }
        if bytes.len() < HELLO_FIXED {
            return Ok(None);
        }
        let incarnation = u64::from_be_bytes(bytes[6..14].try_into().expect("8 bytes"));
        let len = usize::from(bytes[14]);
        let Some(name) = bytes.get(HELLO_FIXED..HELLO_FIXED + len) else {
            return Ok(None);
        };
        let hello = Self {
            version,
            incarnation,
            name: name.to_vec(),
        };
        Ok(Some((hello, HELLO_FIXED + len)))
    }
}

impl Status {
    fn code(&self) -> u8 {
        match self {
            Status::Ok { .. } => 0,
            Status::NameInUse { .. } => 1,
            Status::Busy { .. } => 2,
            Status::Throttled { .. } => 3,
            Status::TlsRequired => 4,
            Status::TlsUnsupported => 5,
            Status::VersionMismatch => 6,
            Status::BadHello => 7,
            Status::UnknownLink => 8,
        }
    }

    /// The status's bytes, in this version. Text over [`MAX_TEXT_BYTES`] is cut.
    pub fn encode(&self) -> Vec<u8> {
        let mut payload = Vec::new();
        match self {
            Status::Ok { incarnation, name } => {
                payload.extend_from_slice(&incarnation.to_be_bytes());
                put_text(&mut payload, name);
            }
            Status::NameInUse {
                name,
                connected_from,
            } => {
                put_text(&mut payload, name);
                put_text(&mut payload, connected_from);
            }
            Status::Busy { scope, limit } => {
                payload.push(match scope {
                    BusyScope::Node => 0,
                    BusyScope::Address => 1,
                });
                payload.extend_from_slice(&limit.to_be_bytes());
            }
            Status::Throttled {
                retry_after,
                failures,
            } => {
                let ms = u32::try_from(retry_after.as_millis()).unwrap_or(u32::MAX);
                payload.extend_from_slice(&ms.to_be_bytes());
                payload.extend_from_slice(&failures.to_be_bytes());
            }
            Status::TlsRequired
            | Status::TlsUnsupported
            | Status::VersionMismatch
            | Status::BadHello
            | Status::UnknownLink => {}
        }
        let mut out = Vec::with_capacity(STATUS_HEADER + payload.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&VERSION.to_be_bytes());
        out.push(self.code());
        out.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        out.extend_from_slice(&payload);
        out
    }

    /// Parses a status from the start of `bytes`: `Ok(None)` until enough bytes are there,
    /// then the answer and how many bytes it took. Any version parses (the layout is frozen),
    /// so that a version mismatch can be reported as such.
    pub fn parse(bytes: &[u8]) -> Result<Option<(Answer, usize)>, PreambleError> {
        let Some(version) = header(bytes)? else {
            return Ok(None);
        };
        if bytes.len() < STATUS_HEADER {
            return Ok(None);
        }
        let code = bytes[6];
        let len = usize::from(u16::from_be_bytes([bytes[7], bytes[8]]));
        if len > MAX_STATUS_PAYLOAD {
            return Err(PreambleError::BadPayload { code, len });
        }
        let Some(payload) = bytes.get(STATUS_HEADER..STATUS_HEADER + len) else {
            return Ok(None);
        };
        let bad = || PreambleError::BadPayload { code, len };
        let mut reader = Reader(payload);
        let status = match code {
            0 => Status::Ok {
                incarnation: reader.u64().ok_or_else(bad)?,
                name: reader.text().ok_or_else(bad)?,
            },
            1 => Status::NameInUse {
                name: reader.text().ok_or_else(bad)?,
                connected_from: reader.text().ok_or_else(bad)?,
            },
            2 => Status::Busy {
                scope: match reader.u8().ok_or_else(bad)? {
                    0 => BusyScope::Node,
                    _ => BusyScope::Address,
                },
                limit: reader.u32().ok_or_else(bad)?,
            },
            3 => Status::Throttled {
                retry_after: Duration::from_millis(u64::from(reader.u32().ok_or_else(bad)?)),
                failures: reader.u32().ok_or_else(bad)?,
            },
            4 => Status::TlsRequired,
            5 => Status::TlsUnsupported,
            6 => Status::VersionMismatch,
            7 => Status::BadHello,
            8 => Status::UnknownLink,
            code => return Err(PreambleError::UnknownCode { code }),
        };
        Ok(Some((Answer { version, status }, STATUS_HEADER + len)))
    }
}

/// Whether `bytes` start like a preamble (as far as they go).
pub fn starts_with_magic(bytes: &[u8]) -> bool {
    let n = bytes.len().min(MAGIC.len());
    n > 0 && bytes[..n] == MAGIC[..n]
}

/// Checks the magic and reads the version; `Ok(None)` until six bytes are there.
fn header(bytes: &[u8]) -> Result<Option<u16>, PreambleError> {
    if !starts_with_magic(bytes) && !bytes.is_empty() {
        return Err(PreambleError::BadMagic {
            first: bytes[..bytes.len().min(4)].to_vec(),
            tls: bytes[0] == 0x16,
        });
    }
    if bytes.len() < 6 {
        return Ok(None);
    }
    Ok(Some(u16::from_be_bytes([bytes[4], bytes[5]])))
}

fn put_text(out: &mut Vec<u8>, text: &[u8]) {
    let text = &text[..text.len().min(MAX_TEXT_BYTES)];
    out.push(text.len() as u8);
    out.extend_from_slice(text);
}

struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let (head, tail) = self.0.split_at_checked(n)?;
        self.0 = tail;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")))
    }

    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
    }

    fn text(&mut self) -> Option<Vec<u8>> {
        let len = usize::from(self.u8()?);
        self.take(len).map(<[u8]>::to_vec)
    }
}
