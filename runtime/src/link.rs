//! Job links: a client's own byte stream to the node whose coordinator runs its job, for that
//! job's polls. The answers of a large job's polls are its draws, up to
//! [`MAX_POLL_REPLY_BYTES`](crate::wire::MAX_POLL_REPLY_BYTES) each; through the cluster
//! session every one of them goes through ractor_cluster's actor-message path (a protobuf
//! message around our envelope, copies at both ends, one writer for every message of the
//! session). A link carries the same envelopes, length-prefixed, over a TCP (or TLS)
//! connection of their own.
//!
//! - **Opening.** A client that asks for one (`WireSampleRequest::link`) gets a
//!   [`LinkToken`] with its job: 32 random bytes that the coordinator keeps in the node's
//!   [`Links`] while the job lives, sent over the authenticated session (TLS where the
//!   cluster runs it). The client dials the node's listener (TLS as for a session, the same
//!   admission and handshake deadline) and sends a link hello with the job and the token in
//!   place of the cookie handshake (`transport::preamble::LinkHello`); a wrong token counts
//!   as a failed handshake, and so does a link past [`MAX_LINKS_PER_JOB`] open at once (each
//!   holds answers at the node).
//! - **Requests.** The client sends whole request envelopes, each `[len: u32 BE][bytes]`, at
//!   most [`MAX_REQUEST_BYTES`]; the node answers each, in order, the same way. Only polls
//!   and cancels of the link's own job pass (anything else closes the link), handed to the
//!   node's coordinator endpoint exactly as a session's call would be, as they come (up to
//!   [`IN_FLIGHT`] ahead of the answers written): decoding, checks and answers are the
//!   endpoint's. A link idle for [`IDLE_LIMIT`] is closed.
//! - **Following.** The client keeps [`IN_FLIGHT`] polls at the node: after the first, each
//!   follows the answer before it (`JobRequest::Poll::follow`), so the coordinator answers
//!   and encodes the next while the last travels and is decoded ([`JobLink::next`]). Where
//!   the node does not say it follows (`JobReply::Submitted::follows`: an older node, which
//!   answers a waiting poll at once when the next arrives), the link keeps one.
//! - **Failure.** A link is an optimisation: a client whose link fails (closed, an answer
//!   over [`MAX_REPLY_BYTES`], a timeout) drops it and polls through the session from the
//!   last event it received (polls are idempotent; one that does not follow starts from its
//!   `ack`).

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ractor::RpcReplyPort;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::time::Instant;

use crate::discovery::COORDINATOR;
use crate::ids::JobId;
use crate::transport::Transport;
use crate::transport::preamble::{LINK_TOKEN_BYTES, LinkHello, VERSION};
use crate::wire::{
    self, CallError, Envelope, JobReply, JobRequest, JobWire, MAX_ENVELOPE_BYTES, Service,
};

/// Largest request a node reads from a link (a poll or a cancel is about a hundred bytes).
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// Largest answer a client reads from a link: the largest envelope.
pub const MAX_REPLY_BYTES: usize = MAX_ENVELOPE_BYTES;

/// A link with no request for this long is closed by the node.
pub const IDLE_LIMIT: Duration = Duration::from_secs(60);

/// Longest wait of the node for its coordinator's answer beyond the poll's own wait.
const ANSWER_SLACK: Duration = Duration::from_secs(10);

/// The secret that opens a job's link. Never printed.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "serde_bytes::ByteBuf", into = "serde_bytes::ByteBuf")]
pub struct LinkToken([u8; LINK_TOKEN_BYTES]);

impl LinkToken {
    /// A token from the operating system's random source.
    pub(crate) fn fresh() -> Result<Self, getrandom::Error> {
        let mut bytes = [0u8; LINK_TOKEN_BYTES];
        getrandom::fill(&mut bytes)?;
        Ok(Self(bytes))
    }

    /// Whether `bytes` are this token, in time independent of where they differ.
    fn matches(&self, bytes: &[u8; LINK_TOKEN_BYTES]) -> bool {
        self.0
            .iter()
            .zip(bytes)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
    }
}

impl fmt::Debug for LinkToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LinkToken(..)")
    }
}

impl TryFrom<serde_bytes::ByteBuf> for LinkToken {
    type Error = String;

    fn try_from(bytes: serde_bytes::ByteBuf) -> Result<Self, String> {
        let bytes = bytes.into_vec();
        let len = bytes.len();
        <[u8; LINK_TOKEN_BYTES]>::try_from(bytes)
            .map(Self)
            .map_err(|_| format!("a link token of {len} bytes (expected {LINK_TOKEN_BYTES})"))
    }
}

impl From<LinkToken> for serde_bytes::ByteBuf {
    fn from(token: LinkToken) -> Self {
        serde_bytes::ByteBuf::from(token.0.to_vec())
    }
}

/// Links of one job open at once: a client uses one, and may open the next before the node
/// has seen the last one close. Each holds up to [`IN_FLIGHT`] answers at the node.
pub const MAX_LINKS_PER_JOB: usize = 2;

/// A job's token and how many of its links are open.
#[derive(Debug)]
struct JobLinks {
    token: LinkToken,
    open: usize,
}

/// The tokens of a node's jobs that have links: issued and revoked by the coordinator,
/// checked by the listener, with the links open. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Links(Arc<Mutex<HashMap<JobId, JobLinks>>>);

/// An open link of a job, counted in its [`Links`] until dropped.
#[derive(Debug)]
pub(crate) struct OpenLink {
    links: Links,
    job: JobId,
}

impl Drop for OpenLink {
    fn drop(&mut self) {
        if let Some(links) = self.links.lock().get_mut(&self.job) {
            links.open = links.open.saturating_sub(1);
        }
    }
}

/// Why a link hello was refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// No live job with that token.
    UnknownToken,
    /// The job has [`MAX_LINKS_PER_JOB`] links open.
    TooManyLinks,
}

impl Links {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<JobId, JobLinks>> {
        // A map of plain values: usable after a panic elsewhere.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new token for `job` (replacing any earlier one); `None` when the random source
    /// fails (the job then goes without a link).
    pub(crate) fn issue(&self, job: JobId) -> Option<LinkToken> {
        match LinkToken::fresh() {
            Ok(token) => {
                let mut links = self.lock();
                let open = links.get(&job).map_or(0, |links| links.open);
                let entry = JobLinks {
                    token: token.clone(),
                    open,
                };
                links.insert(job, entry);
                Some(token)
            }
            Err(error) => {
                tracing::warn!("no link for job {job}: the random source failed ({error})");
                None
            }
        }
    }

    /// `job`'s token no longer opens a link (links already open find the job gone).
    pub(crate) fn revoke(&self, job: JobId) {
        self.lock().remove(&job);
    }

    /// Revokes every token (a new coordinator knows none of the old one's jobs).
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    /// Opens a link of `job` with `token`: counted until the [`OpenLink`] is dropped, and
    /// refused past [`MAX_LINKS_PER_JOB`].
    pub(crate) fn open(
        &self,
        job: JobId,
        token: &[u8; LINK_TOKEN_BYTES],
    ) -> Result<OpenLink, Refused> {
        let mut links = self.lock();
        let Some(entry) = links
            .get_mut(&job)
            .filter(|links| links.token.matches(token))
        else {
            return Err(Refused::UnknownToken);
        };
        if entry.open >= MAX_LINKS_PER_JOB {
            return Err(Refused::TooManyLinks);
        }
        entry.open += 1;
        Ok(OpenLink {
            links: self.clone(),
            job,
        })
    }
}

/// Reads one frame of at most `max` bytes: `Ok(None)` if the stream ended before a frame
/// began.
async fn read_frame<S: AsyncRead + Unpin>(
    stream: &mut S,
    max: usize,
) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    Ok(read_frame_into(stream, max, &mut bytes)
        .await?
        .then_some(bytes))
}

/// Reads one frame of at most `max` bytes into `bytes` (replacing what it held, reusing its
/// room): `Ok(false)` if the stream ended before a frame began. Nothing is zeroed first, and
/// a buffer that held an answer as large takes the next without allocating.
async fn read_frame_into<S: AsyncRead + Unpin>(
    stream: &mut S,
    max: usize,
    bytes: &mut Vec<u8>,
) -> std::io::Result<bool> {
    let mut len = [0u8; 4];
    match stream.read_exact(&mut len).await {
        Ok(_) => {}
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(false),
        Err(error) => return Err(error),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len > max {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a frame of {len} bytes (at most {max})"),
        ));
    }
    bytes.clear();
    bytes.reserve_exact(len);
    while bytes.len() < len {
        let missing = (len - bytes.len()) as u64;
        if (&mut *stream).take(missing).read_buf(bytes).await? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(true)
}

async fn write_frame<S: AsyncWrite + Unpin>(stream: &mut S, bytes: &[u8]) -> std::io::Result<()> {
    let len = u32::try_from(bytes.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "a frame over 4 GiB"))?;
    stream.write_all(&len.to_be_bytes()).await?;
    stream.write_all(bytes).await?;
    stream.flush().await
}

/// The node's side of an opened link of `job` from `peer`: requests in, answers out, until
/// the client closes it, it idles past [`IDLE_LIMIT`], or a request is not a poll or cancel
/// of `job`.
pub(crate) async fn serve<S>(stream: S, job: JobId, peer: SocketAddr)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut timing = ServeTiming::default();
    let why = serve_requests(stream, job, peer, &mut timing).await;
    tracing::debug!(
        target: "runtime::timeline",
        coordinator_ms = timing.waiting.as_secs_f64() * 1e3,
        write_ms = timing.writing.as_secs_f64() * 1e3,
        "job link of {job} from {peer} closed: {why}"
    );
}

/// Where a link's server spent its time: waiting for the coordinator's answers, writing them.
#[derive(Default)]
struct ServeTiming {
    waiting: Duration,
    writing: Duration,
}

/// A request handed to the coordinator whose answer the link has yet to write.
struct Pending {
    answer: tokio::sync::oneshot::Receiver<Vec<u8>>,
    wait: Duration,
    asked: std::time::Instant,
}

/// [`serve`]'s loops: requests are read and handed to the coordinator as they come (up to
/// [`IN_FLIGHT`] ahead of the answers written), and their answers written in order, so that
/// the coordinator answers the next poll while the last answer travels. Returns why the link
/// closed.
async fn serve_requests<S>(
    stream: S,
    job: JobId,
    peer: SocketAddr,
    timing: &mut ServeTiming,
) -> String
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (mut reader, mut writer) = tokio::io::split(stream);
    let (pending, mut answers) = tokio::sync::mpsc::channel::<Pending>(IN_FLIGHT);
    let read = async move {
        loop {
            let request =
                match tokio::time::timeout(IDLE_LIMIT, read_frame(&mut reader, MAX_REQUEST_BYTES))
                    .await
                {
                    Err(_) => return format!("no request for {IDLE_LIMIT:?}"),
                    Ok(Ok(Some(request))) => request,
                    Ok(Ok(None)) => return "by the client".to_owned(),
                    Ok(Err(error)) => return error.to_string(),
                };
            let wait = match request_of(&request, job) {
                Ok(wait) => wait,
                Err(why) => {
                    tracing::info!("closing the job link of {job} from {peer}: {why}");
                    return why;
                }
            };
            let Some(endpoint) = local_coordinator() else {
                return "this node's coordinator endpoint is not running".to_owned();
            };
            let (tx, rx) = tokio::sync::oneshot::channel();
            let port = RpcReplyPort::from((tx, wait + ANSWER_SLACK));
            if endpoint.cast(JobWire::call(request, port)).is_err() {
                return "the coordinator endpoint stopped".to_owned();
            }
            let asked = std::time::Instant::now();
            let handed = pending.send(Pending {
                answer: rx,
                wait,
                asked,
            });
            if handed.await.is_err() {
                return "its writer stopped".to_owned();
            }
        }
    };
    let write = async {
        while let Some(Pending {
            answer,
            wait,
            asked,
        }) = answers.recv().await
        {
            let answer = match tokio::time::timeout(wait + ANSWER_SLACK, answer).await {
                Ok(Ok(answer)) => answer,
                Ok(Err(_)) => return "the coordinator dropped a request".to_owned(),
                Err(_) => return "the coordinator did not answer in time".to_owned(),
            };
            let answered = std::time::Instant::now();
            timing.waiting += answered - asked;
            let written = write_frame(&mut writer, &answer).await;
            timing.writing += answered.elapsed();
            if let Err(error) = written {
                return error.to_string();
            }
        }
        "its reader stopped".to_owned()
    };
    tokio::select! {
        why = read => why,
        why = write => why,
    }
}

/// How long `request` may wait at the coordinator, if it is a poll or cancel of `job`.
fn request_of(request: &[u8], job: JobId) -> Result<Duration, String> {
    let envelope = Envelope::<JobRequest>::decode(request)
        .map_err(|error| format!("a request that does not decode ({error})"))?;
    match envelope.body {
        JobRequest::Poll {
            job: of, wait_ms, ..
        } if of == job => Ok(Duration::from_millis(u64::from(wait_ms))),
        JobRequest::Cancel { job: of } if of == job => Ok(Duration::ZERO),
        JobRequest::Poll { job: of, .. } | JobRequest::Cancel { job: of } => {
            Err(format!("a request about job {of}"))
        }
        JobRequest::Submit(_) => Err("a submission (links carry polls only)".to_owned()),
    }
}

fn local_coordinator() -> Option<ractor::ActorRef<JobWire>> {
    COORDINATOR
        .all_members()
        .into_iter()
        .find_map(|(session, endpoint)| session.is_none().then_some(endpoint))
}

/// Polls a link keeps at the node at once: while answers travel and the client decodes
/// them, the next poll waits at the coordinator, to be answered (and encoded) meanwhile.
pub(crate) const IN_FLIGHT: usize = 3;

/// Fewest draws (chains x draws kept, and warmup ones where saved) of a job whose client asks
/// for a link: a smaller job's events fit a poll or two through the session, and opening a
/// stream would cost it more than it saves.
pub(crate) const LINK_MIN_DRAWS: u64 = 4096;

/// A client's open link to the node running its job. Its first [`JobLink::next`] starts a
/// task that follows the job: it keeps [`IN_FLIGHT`] polls at the node, each asking for the
/// events after the last answer's (`JobRequest::Poll::follow`), reads and decodes their
/// answers, and hands them over in order.
pub(crate) struct JobLink {
    job: JobId,
    /// Polls kept at the node ([`IN_FLIGHT`], or one where the node does not follow).
    in_flight: usize,
    state: LinkState,
    timing: Arc<LinkTiming>,
}

enum LinkState {
    /// Opened; no poll sent yet.
    Open(crate::transport::LinkIo),
    /// Its task follows the job.
    Following {
        answers: tokio::sync::mpsc::Receiver<Followed>,
        task: tokio::task::JoinHandle<()>,
    },
    /// Its task ended: after the job's last event, an answer that was not events, or a
    /// failure.
    Ended,
}

/// What a link's task hands over: a poll's answer as [`wire::call`] would give it, or why the
/// link failed (its last item).
pub(crate) type Followed = Result<Result<Envelope<JobReply>, CallError>, LinkFailed>;

/// Time a link's task spent waiting for answers and decoding them, in nanoseconds.
#[derive(Debug, Default)]
pub(crate) struct LinkTiming {
    exchanging: AtomicU64,
    decoding: AtomicU64,
}

impl LinkTiming {
    fn add(counter: &AtomicU64, time: Duration) {
        let nanos = u64::try_from(time.as_nanos()).unwrap_or(u64::MAX);
        counter.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Time waiting for answers, and decoding them.
    pub(crate) fn get(&self) -> (Duration, Duration) {
        let get = |counter: &AtomicU64| Duration::from_nanos(counter.load(Ordering::Relaxed));
        (get(&self.exchanging), get(&self.decoding))
    }
}

impl fmt::Debug for JobLink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobLink")
            .field("job", &self.job)
            .finish_non_exhaustive()
    }
}

impl Drop for JobLink {
    fn drop(&mut self) {
        if let LinkState::Following { task, .. } = &self.state {
            task.abort();
        }
    }
}

/// Why a link stopped carrying a call.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LinkFailed {
    /// The stream failed or closed, or an answer was over its limit.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// No answer within the call's time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// How a link's task polls: from `ack`, as `me`, each answer read within `timeout`.
pub(crate) struct Follow {
    pub(crate) ack: u64,
    pub(crate) wait_ms: u32,
    pub(crate) timeout: Duration,
    pub(crate) me: crate::ids::NodeName,
    pub(crate) peer: String,
}

impl JobLink {
    /// Opens `job`'s link to the node at `address` with `token`, within `deadline`.
    pub(crate) async fn open(
        transport: &Transport,
        address: SocketAddr,
        job: JobId,
        token: &LinkToken,
        deadline: Instant,
    ) -> Result<Self, crate::ConnectError> {
        let hello = LinkHello {
            version: VERSION,
            job: job.0,
            token: token.0,
        };
        let io = transport.dial_link(address, &hello, deadline).await?;
        Ok(Self {
            job,
            in_flight: IN_FLIGHT,
            state: LinkState::Open(io),
            timing: Arc::default(),
        })
    }

    /// Keeps `polls` polls at the node (at least one, at most [`IN_FLIGHT`]) instead of
    /// [`IN_FLIGHT`].
    pub(crate) fn in_flight(mut self, polls: usize) -> Self {
        self.in_flight = polls.clamp(1, IN_FLIGHT);
        self
    }

    /// The job whose link this is.
    pub(crate) fn job(&self) -> JobId {
        self.job
    }

    /// Time the link's task spent waiting for answers, and decoding them.
    pub(crate) fn timing(&self) -> (Duration, Duration) {
        self.timing.get()
    }

    /// The next answer of the job's polls; the first call starts following the job as
    /// `follow` says. `None`: the link has ended (poll through the session). Cancel safe.
    pub(crate) async fn next(&mut self, follow: impl FnOnce() -> Follow) -> Option<Followed> {
        if matches!(self.state, LinkState::Open(_)) {
            let LinkState::Open(io) = std::mem::replace(&mut self.state, LinkState::Ended) else {
                unreachable!("matched above")
            };
            let (tx, answers) = tokio::sync::mpsc::channel(1);
            let follow = follow();
            let task = tokio::spawn(follow_job(
                io,
                self.job,
                self.in_flight,
                follow,
                tx,
                self.timing.clone(),
            ));
            self.state = LinkState::Following { answers, task };
        }
        let LinkState::Following { answers, .. } = &mut self.state else {
            return None;
        };
        let next = answers.recv().await;
        if next.is_none() {
            self.state = LinkState::Ended;
        }
        next
    }
}

/// A link's task: keeps `in_flight` polls of `job` at the node, hands each answer over to
/// `answers` in order, until the job's last event, an answer that is not events, a failure,
/// or the receiver's end. Answers are read while the one before is decoded: the next poll
/// can only go out once an answer is decoded (it acknowledges that answer's events).
async fn follow_job(
    io: crate::transport::LinkIo,
    job: JobId,
    in_flight: usize,
    follow: Follow,
    answers: tokio::sync::mpsc::Sender<Followed>,
    timing: Arc<LinkTiming>,
) {
    let (mut reader, mut writer) = tokio::io::split(io);
    let (frames_tx, mut frames) = tokio::sync::mpsc::channel::<Result<Vec<u8>, LinkFailed>>(1);
    // Decoded answers' buffers go back to the reader: their room takes the next answers.
    let (spare_tx, mut spare) = tokio::sync::mpsc::channel::<Vec<u8>>(IN_FLIGHT);
    let read_timing = timing.clone();
    let timeout = follow.timeout;
    let read = async move {
        loop {
            let mut buffer = spare.try_recv().unwrap_or_default();
            let started = std::time::Instant::now();
            let read = match tokio::time::timeout(
                timeout,
                read_frame_into(&mut reader, MAX_REPLY_BYTES, &mut buffer),
            )
            .await
            {
                Err(_) => Err(LinkFailed::Timeout(timeout)),
                Ok(Err(error)) => Err(LinkFailed::Io(error)),
                Ok(Ok(false)) => Err(LinkFailed::Io(std::io::ErrorKind::UnexpectedEof.into())),
                Ok(Ok(true)) => Ok(buffer),
            };
            LinkTiming::add(&read_timing.exchanging, started.elapsed());
            let failed = read.is_err();
            if frames_tx.send(read).await.is_err() || failed {
                // The decoder ends the task.
                return std::future::pending::<()>().await;
            }
        }
    };
    let decode = async move {
        let mut ack = follow.ack;
        let poll = |ack: u64, follows: bool| {
            let request = JobRequest::Poll {
                job,
                ack,
                wait_ms: follow.wait_ms,
                follow: follows,
            };
            request.envelope(&follow.me, job).encode()
        };
        let mut sent = 0;
        let failed = 'follow: loop {
            // The first poll starts from `ack`; the others follow the answers before them.
            while sent < in_flight {
                let bytes = match poll(ack, sent > 0 || ack > follow.ack) {
                    Ok(bytes) => bytes,
                    Err(error) => {
                        let error = CallError::Wire {
                            service: JobWire::NAME,
                            peer: follow.peer.clone(),
                            error,
                        };
                        let _ = answers.send(Ok(Err(error))).await;
                        return;
                    }
                };
                if let Err(error) = write_frame(&mut writer, &bytes).await {
                    break 'follow LinkFailed::Io(error);
                }
                sent += 1;
            }
            let buffer = match frames.recv().await {
                Some(Ok(buffer)) => buffer,
                Some(Err(failed)) => break failed,
                None => return,
            };
            sent -= 1;
            let decoding = std::time::Instant::now();
            let reply = wire::reply_from_bytes::<JobWire>(&buffer, &follow.peer);
            LinkTiming::add(&timing.decoding, decoding.elapsed());
            let _ = spare_tx.try_send(buffer);
            let goes_on = match &reply {
                Ok(Envelope {
                    body: JobReply::Events { events, .. },
                    ..
                }) => {
                    if let Some(last) = events.last() {
                        ack = ack.max(last.seq);
                    }
                    !events.iter().any(|event| event.event.ends_job())
                }
                _ => false,
            };
            if answers.send(Ok(reply)).await.is_err() || !goes_on {
                return;
            }
        };
        let _ = answers.send(Err(failed)).await;
    };
    tokio::select! {
        () = read => {}
        () = decode => {}
    }
}

#[cfg(test)]
mod tests;
