"""Compressed text artefacts (`train.log.gz`, `train.log.zst`): recognised by their magic bytes,
read as a plain binary stream. gzip comes with Python; zstd needs the optional `zstandard`
package (`pip install 'precdx[zstd]'`).

`open_binary(path)` is a drop-in for `open(path, "rb")` that decompresses transparently. A
compressed file cut short (a log copied while still being written) reads as far as it goes; a
corrupt one raises OSError naming the problem, so callers that already handle unreadable files
need nothing else.
"""
from __future__ import annotations

import zlib
from pathlib import Path
from typing import BinaryIO

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
SUFFIXES = {".gz": "gzip", ".gzip": "gzip", ".zst": "zstd", ".zstd": "zstd"}


class CompressionError(OSError):
    """A compressed artefact that cannot be decompressed (corrupt, or zstandard missing)."""


def compression_of(path: Path | str, head: bytes) -> str | None:
    """'gzip' / 'zstd' when the file is compressed (magic bytes decide; the suffix is a hint
    only for error messages), else None."""
    if head.startswith(GZIP_MAGIC):
        return "gzip"
    if head.startswith(ZSTD_MAGIC):
        return "zstd"
    return None


def plain_name(path: Path | str) -> str:
    """The file name without its compression suffix: `train.log.gz` -> `train.log`."""
    name = Path(path).name
    low = name.lower()
    for suffix in SUFFIXES:
        if low.endswith(suffix):
            return name[: -len(suffix)]
    return name


class _GzipStream:
    """Streaming gzip decompression with zlib (multi-member files too). Unlike GzipFile, data
    decompressed before an early end of the file is kept: a cut-off log reads up to the cut."""

    BLOCK = 1 << 16

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.z = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.buf = b""
        self.done = False
        self.truncated = False

    def read(self, size: int) -> bytes:
        while len(self.buf) < size and not self.done:
            chunk = self.raw.read(self.BLOCK)
            if not chunk:
                self.buf += self.z.flush()
                self.done = True
                self.truncated = not self.z.eof
                break
            self.buf += self.z.decompress(chunk)
            while self.z.eof and self.z.unused_data:  # next gzip member
                rest = self.z.unused_data
                if not rest.startswith(GZIP_MAGIC):
                    break  # trailing garbage after the last member: ignored, as gzip(1) does
                self.z = zlib.decompressobj(16 + zlib.MAX_WBITS)
                self.buf += self.z.decompress(rest)
        out, self.buf = self.buf[:size], self.buf[size:]
        return out

    def close(self) -> None:
        self.buf = b""


class _Decompressed:
    """A read-only binary stream over a compressed file; `seek(0)` re-opens it (enough for
    readers that sniff a head and start again). An early end of data is the end of the stream;
    corrupt data raises CompressionError."""

    def __init__(self, path: Path, kind: str) -> None:
        self.path, self.kind = path, kind
        self.truncated = False
        self._raw: BinaryIO | None = None
        self._stream = None
        self._open()

    def _open(self) -> None:
        self.close()
        self._raw = open(self.path, "rb")
        if self.kind == "gzip":
            self._stream = _GzipStream(self._raw)
        else:
            try:
                import zstandard
            except ImportError:
                self._raw.close()
                raise CompressionError("zstd-compressed; reading it needs the zstandard package "
                                       "(pip install 'precdx[zstd]')") from None
            self._stream = zstandard.ZstdDecompressor().stream_reader(self._raw, read_across_frames=True)

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            chunks = []
            while True:
                chunk = self.read(1 << 20)
                if not chunk:
                    return b"".join(chunks)
                chunks.append(chunk)
        if self.truncated or self._stream is None:
            return b""
        try:
            out = self._stream.read(size)
            if not out and getattr(self._stream, "truncated", False):
                self.truncated = True
            return out
        except EOFError:  # gzip cut short: what came before is good
            self.truncated = True
            return b""
        except zlib.error as exc:
            raise CompressionError(f"corrupt gzip data ({exc})") from None
        except OSError:
            raise
        except Exception as exc:  # zstandard.ZstdError and friends
            if type(exc).__module__.startswith("zstandard") or "zstd" in type(exc).__name__.lower():
                msg = str(exc)
                if "incomplete" in msg.lower() or "truncat" in msg.lower():
                    self.truncated = True
                    return b""
                raise CompressionError(f"corrupt zstd data ({exc})") from None
            raise

    def seek(self, offset: int, whence: int = 0) -> int:
        if offset != 0 or whence != 0:
            raise CompressionError("compressed streams only rewind to the start")
        self.truncated = False
        self._open()
        return 0

    def close(self) -> None:
        for obj in (self._stream, self._raw):
            if obj is not None:
                try:
                    obj.close()
                except Exception:  # closing a half-read stream must not mask the real problem
                    pass
        self._stream = self._raw = None

    def __enter__(self) -> "_Decompressed":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __iter__(self):  # line iteration, as for a file opened in binary mode
        rest = b""
        while True:
            chunk = self.read(1 << 20)
            if not chunk:
                break
            data = rest + chunk
            lines = data.split(b"\n")
            rest = lines.pop()
            for line in lines:
                yield line + b"\n"
        if rest:
            yield rest


def open_binary(path: Path | str):
    """`open(path, 'rb')`, decompressing gzip/zstd content transparently."""
    path = Path(path)
    with open(path, "rb") as fh:
        head = fh.read(4)
    kind = compression_of(path, head)
    if kind is None:
        return open(path, "rb")
    return _Decompressed(path, kind)


def read_head(path: Path | str, size: int) -> bytes:
    """The first `size` bytes of the (decompressed) content."""
    with open_binary(path) as fh:
        out = b""
        while len(out) < size:
            chunk = fh.read(size - len(out))
            if not chunk:
                break
            out += chunk
        return out
