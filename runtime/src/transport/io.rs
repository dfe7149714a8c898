//! The byte streams under a cluster connection: plain TCP or TLS either way, one type for the
//! preamble and the split ractor_cluster wants; and the recorder that keeps the first bytes a
//! TLS dialler received, so that a plaintext refusal in their place can be read.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use ractor_cluster::{BoxRead, BoxWrite};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::{Duration, timeout};

use super::preamble::MAX_STATUS_BYTES;

/// A connection's stream.
pub(crate) enum Io {
    Plain(TcpStream),
    TlsServer(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    TlsClient(Box<tokio_rustls::client::TlsStream<Recorder>>),
}

impl Io {
    /// The halves ractor_cluster reads and writes.
    pub(crate) fn split(self) -> (BoxRead, BoxWrite) {
        match self {
            Io::Plain(stream) => {
                let (read, write) = stream.into_split();
                (Box::new(read), Box::new(write))
            }
            Io::TlsServer(stream) => {
                let (read, write) = tokio::io::split(*stream);
                (Box::new(read), Box::new(write))
            }
            Io::TlsClient(stream) => {
                let (read, write) = tokio::io::split(*stream);
                (Box::new(read), Box::new(write))
            }
        }
    }
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Io::Plain(stream) => Pin::new(stream).poll_read(cx, buf),
            Io::TlsServer(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
            Io::TlsClient(stream) => Pin::new(stream.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(stream) => Pin::new(stream).poll_write(cx, buf),
            Io::TlsServer(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
            Io::TlsClient(stream) => Pin::new(stream.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Io::Plain(stream) => Pin::new(stream).poll_flush(cx),
            Io::TlsServer(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
            Io::TlsClient(stream) => Pin::new(stream.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            Io::Plain(stream) => Pin::new(stream).poll_shutdown(cx),
            Io::TlsServer(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
            Io::TlsClient(stream) => Pin::new(stream.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A TCP stream that keeps a copy of the first bytes read from it.
pub(crate) struct Recorder {
    stream: TcpStream,
    seen: Arc<Mutex<Vec<u8>>>,
}

impl Recorder {
    /// Wraps `stream`; the returned buffer fills with its first [`MAX_STATUS_BYTES`] bytes.
    pub(crate) fn new(stream: TcpStream) -> (Self, Arc<Mutex<Vec<u8>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let recorder = Self {
            stream,
            seen: Arc::clone(&seen),
        };
        (recorder, seen)
    }
}

impl AsyncRead for Recorder {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.stream).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled
            && let Ok(mut seen) = this.seen.lock()
            && seen.len() < MAX_STATUS_BYTES
        {
            let new = &buf.filled()[before..];
            let room = MAX_STATUS_BYTES - seen.len();
            seen.extend_from_slice(&new[..new.len().min(room)]);
        }
        polled
    }
}

impl AsyncWrite for Recorder {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// How long a refused connection is given to read our answer and close.
pub(crate) const LINGER: Duration = Duration::from_secs(1);

/// Sends `answer` and closes `stream` gracefully: our side is shut down, then what the peer
/// still sends is read and dropped (at most 64 KiB, at most [`LINGER`]), so that the close
/// does not reset the connection before the peer read the answer.
pub(crate) async fn answer_and_close<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    answer: &[u8],
) {
    let _ = timeout(LINGER, async {
        stream.write_all(answer).await?;
        stream.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut read = 0;
        while read < 64 * 1024 {
            match stream.read(&mut sink).await? {
                0 => break,
                n => read += n,
            }
        }
        Ok::<_, std::io::Error>(())
    })
    .await;
}
