//! Where the encoder writes: the [`Sink`] trait and its implementations ([`SliceSink`],
//! [`BufSink`], [`IoSink`], `Vec<u8>`).

use core::fmt;
use std::io;

/// Why a [`Sink`] could not take bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SinkError {
    /// A fixed-capacity sink is full (nothing of the rejected buffer was written).
    Full,
    /// The OS refused the write; the value is the `errno` (`ENOSPC`, `EIO`, ...).
    Os(i32),
    /// Another I/O failure ([`IoSink`] keeps the original [`io::Error`]).
    Other,
}

impl fmt::Display for SinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SinkError::Full => f.write_str("output buffer full"),
            SinkError::Os(e) => write!(f, "write failed (errno {e})"),
            SinkError::Other => f.write_str("write failed"),
        }
    }
}

impl std::error::Error for SinkError {}

/// Where an [`Encoder`](super::Encoder) writes: a file descriptor, a buffer, an [`io::Write`].
///
/// Implementations used by the preload must not allocate or take locks.
pub trait Sink {
    /// Writes all of `buf`, or fails. After a failure the encoder writes nothing more.
    fn write_all(&mut self, buf: &[u8]) -> Result<(), SinkError>;
}

impl<S: Sink + ?Sized> Sink for &mut S {
    fn write_all(&mut self, buf: &[u8]) -> Result<(), SinkError> {
        (**self).write_all(buf)
    }
}

/// Appends to the vector (allocates: for tests and tools, not for the preload).
impl Sink for Vec<u8> {
    fn write_all(&mut self, buf: &[u8]) -> Result<(), SinkError> {
        self.extend_from_slice(buf);
        Ok(())
    }
}

/// A sink over a caller-provided byte slice; fails with [`SinkError::Full`] when it does not fit.
/// Allocation-free.
#[derive(Debug)]
pub struct SliceSink<'a> {
    buf: &'a mut [u8],
    len: usize,
}

impl<'a> SliceSink<'a> {
    /// An empty sink writing into `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        SliceSink { buf, len: 0 }
    }
    /// The bytes written so far.
    pub fn written(&self) -> &[u8] {
        self.buf.get(..self.len).unwrap_or_default()
    }
    /// Number of bytes written so far.
    pub fn len(&self) -> usize {
        self.len
    }
    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Sink for SliceSink<'_> {
    fn write_all(&mut self, buf: &[u8]) -> Result<(), SinkError> {
        append(self.buf, &mut self.len, buf)
    }
}

/// A fixed-size write buffer in front of another sink, so that a sink doing one `write(2)` per
/// call sees few large writes. Allocation-free; `N` bytes live inline.
///
/// Nothing is flushed on drop: call [`flush`](BufSink::flush) or
/// [`into_inner`](BufSink::into_inner) after [`Encoder::finish`](super::Encoder::finish).
#[derive(Debug)]
pub struct BufSink<S: Sink, const N: usize> {
    inner: S,
    buf: [u8; N],
    len: usize,
}

impl<S: Sink, const N: usize> BufSink<S, N> {
    /// An empty buffer in front of `inner`.
    pub fn new(inner: S) -> Self {
        BufSink { inner, buf: [0; N], len: 0 }
    }
    /// Writes the buffered bytes to the inner sink.
    pub fn flush(&mut self) -> Result<(), SinkError> {
        if self.len > 0 {
            let pending = self.buf.get(..self.len).unwrap_or_default();
            self.inner.write_all(pending)?;
            self.len = 0;
        }
        Ok(())
    }
    /// Flushes and returns the inner sink.
    pub fn into_inner(mut self) -> Result<S, SinkError> {
        self.flush()?;
        Ok(self.inner)
    }
    /// The inner sink (bytes still buffered are not in it yet).
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

impl<S: Sink, const N: usize> Sink for BufSink<S, N> {
    fn write_all(&mut self, buf: &[u8]) -> Result<(), SinkError> {
        let room = N.saturating_sub(self.len);
        if buf.len() > room {
            self.flush()?;
        }
        if buf.len() >= N {
            return self.inner.write_all(buf);
        }
        append(&mut self.buf, &mut self.len, buf)
    }
}

/// Copies `src` into `buf` after its first `*len` bytes and advances `*len`; [`SinkError::Full`],
/// writing nothing, when it does not fit.
fn append(buf: &mut [u8], len: &mut usize, src: &[u8]) -> Result<(), SinkError> {
    let end = len.checked_add(src.len()).ok_or(SinkError::Full)?;
    let dst = buf.get_mut(*len..end).ok_or(SinkError::Full)?;
    dst.copy_from_slice(src);
    *len = end;
    Ok(())
}

/// Adapts any [`io::Write`] (allocates on error only: it keeps the [`io::Error`]).
#[derive(Debug)]
pub struct IoSink<W: io::Write> {
    inner: W,
    error: Option<io::Error>,
}

impl<W: io::Write> IoSink<W> {
    /// Wraps a writer. Wrap files in an [`io::BufWriter`]: the encoder writes each record
    /// with one or a few small writes.
    pub fn new(inner: W) -> Self {
        IoSink { inner, error: None }
    }
    /// The last write error, if any.
    pub fn take_error(&mut self) -> Option<io::Error> {
        self.error.take()
    }
    /// The writer.
    pub fn into_inner(self) -> W {
        self.inner
    }
    /// The writer, by reference.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }
}

impl<W: io::Write> Sink for IoSink<W> {
    fn write_all(&mut self, buf: &[u8]) -> Result<(), SinkError> {
        self.inner.write_all(buf).map_err(|e| {
            let se = match e.raw_os_error() {
                Some(n) => SinkError::Os(n),
                None => SinkError::Other,
            };
            self.error = Some(e);
            se
        })
    }
}
