"""Unpack an uploaded zip or tar of run folders, safely: every member must land inside the
extraction folder as a plain file or folder, and sizes are counted on the bytes actually
decompressed (never on what headers claim), so zip and gzip bombs stop at the limit.

Rejected with 4xx: absolute paths, drive letters, `..`, NUL bytes, symlinks, hardlinks, device
files and FIFOs, encrypted zip members, duplicate members, too many files, too many bytes,
too deep paths, and anything that is not a zip or (compressed) tar.
"""
from __future__ import annotations

import bz2
import gzip
import lzma
import os
import re
import stat
import tarfile
import time
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Iterator

from precdx.service.errors import ServiceError

CHUNK = 64 * 1024
MAX_DEPTH = 32
MAX_NAME = 1024
MAX_PART = 255
ROLE_DIRS = ("baseline", "target")

_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(frozen=True)
class Limits:
    max_bytes: int          # total bytes written after decompression
    max_files: int          # regular files and folders
    deadline: float | None = None  # time.monotonic() after which extraction stops (408)


@dataclass
class Stats:
    files: int = 0
    bytes: int = 0


def bad(message: str) -> ServiceError:
    return ServiceError(400, "bad_archive", message)


def too_large(message: str) -> ServiceError:
    return ServiceError(413, "archive_too_large", message)


def _check_deadline(limits: Limits) -> None:
    if limits.deadline is not None and time.monotonic() > limits.deadline:
        raise ServiceError(408, "timeout", "the archive took too long to unpack")


def safe_parts(name: str) -> tuple[str, ...]:
    """The path parts of a member name, or a 400 when the name could leave the folder."""
    if not name or "\x00" in name:
        raise bad(f"member name {name!r} is empty or holds a NUL byte")
    if len(name) > MAX_NAME:
        raise bad(f"member name longer than {MAX_NAME} characters")
    text = name.replace("\\", "/")
    if text.startswith("/") or _DRIVE.match(text):
        raise bad(f"member {name!r} has an absolute path")
    parts = [p for p in PurePosixPath(text).parts if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise bad(f"member {name!r} points outside the archive ('..')")
    if len(parts) > MAX_DEPTH:
        raise bad(f"member {name!r} is nested deeper than {MAX_DEPTH} folders")
    if any(len(p) > MAX_PART for p in parts):
        raise bad(f"member {name!r} has a path part longer than {MAX_PART} characters")
    return tuple(parts)


class _Writer:
    """Creates folders and files below `root`, never following or creating links."""

    def __init__(self, root: Path, limits: Limits) -> None:
        self.root = root
        self.real_root = os.path.realpath(root)
        self.limits = limits
        self.stats = Stats()

    def _count(self) -> None:
        self.stats.files += 1
        if self.stats.files > self.limits.max_files:
            raise too_large(f"the archive holds more than {self.limits.max_files} files")

    def _target(self, parts: tuple[str, ...]) -> Path:
        path = self.root.joinpath(*parts)
        real_parent = os.path.realpath(path.parent)
        if os.path.commonpath([self.real_root, real_parent]) != self.real_root:
            raise bad(f"member {'/'.join(parts)!r} points outside the archive")
        return path

    def mkdir(self, parts: tuple[str, ...]) -> None:
        if not parts:
            return
        current = self.root
        for part in parts:
            current = current / part
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                self._count()
                os.mkdir(current, 0o700)
                continue
            if not stat.S_ISDIR(st.st_mode):
                raise bad(f"member {'/'.join(parts)!r} uses a file as a folder")

    def write(self, parts: tuple[str, ...], chunks: Iterator[bytes]) -> None:
        if not parts:
            raise bad("a file member has an empty name")
        self.mkdir(parts[:-1])
        path = self._target(parts)
        self._count()
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            raise bad(f"member {'/'.join(parts)!r} appears twice (or collides with a folder)") from None
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                self.stats.bytes += len(chunk)
                if self.stats.bytes > self.limits.max_bytes:
                    raise too_large(f"the archive unpacks to more than {self.limits.max_bytes} bytes")
                _check_deadline(self.limits)
                out.write(chunk)


def _read_chunks(stream: BinaryIO) -> Iterator[bytes]:
    while True:
        chunk = stream.read(CHUNK)
        if not chunk:
            return
        yield chunk


class _CountingReader:
    """A read-only stream over decompressed data that stops at a byte budget (tar headers,
    long names and padding count too, not only file contents)."""

    def __init__(self, raw: BinaryIO, budget: int, limits: Limits) -> None:
        self.raw = raw
        self.budget = budget
        self.limits = limits
        self.total = 0

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            size = CHUNK
        data = self.raw.read(min(size, CHUNK * 16))
        self.total += len(data)
        if self.total > self.budget:
            raise too_large(f"the archive unpacks to more than {self.limits.max_bytes} bytes")
        _check_deadline(self.limits)
        return data


def detect(head: bytes) -> str | None:
    if head[:4] in (b"PK\x03\x04", b"PK\x05\x06", b"PK\x07\x08"):
        return "zip"
    if head[:2] == b"\x1f\x8b":
        return "tar.gz"
    if head[:3] == b"BZh":
        return "tar.bz2"
    if head[:6] == b"\xfd7zXZ\x00":
        return "tar.xz"
    if len(head) >= 262 and head[257:262] == b"ustar":
        return "tar"
    return None


def extract(fileobj: BinaryIO, dest: Path, limits: Limits) -> Stats:
    """Unpack a zip or (gzip/bzip2/xz-compressed) tar into the empty folder `dest`."""
    fileobj.seek(0)
    head = fileobj.read(512)
    fileobj.seek(0)
    kind = detect(head)
    if kind is None:
        raise ServiceError(415, "unsupported_archive", "the upload is not a zip or tar archive")
    writer = _Writer(dest, limits)
    try:
        if kind == "zip":
            _extract_zip(fileobj, writer)
        else:
            _extract_tar(fileobj, kind, writer)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, tarfile.TarError, EOFError, zlib.error, lzma.LZMAError,
            gzip.BadGzipFile, NotImplementedError, ValueError) as exc:
        raise bad(f"the archive is damaged or unsupported: {exc}") from None
    except OSError as exc:  # bz2 reports corrupt data as OSError
        raise bad(f"the archive could not be read: {exc.strerror or exc}") from None
    return writer.stats


def _extract_zip(fileobj: BinaryIO, writer: _Writer) -> None:
    with zipfile.ZipFile(fileobj) as zf:
        infos = zf.infolist()
        if len(infos) > writer.limits.max_files:
            raise too_large(f"the archive holds more than {writer.limits.max_files} files")
        for info in infos:
            _check_deadline(writer.limits)
            parts = safe_parts(info.filename)
            mode = (info.external_attr >> 16) & 0xFFFF
            ftype = stat.S_IFMT(mode)
            if ftype == stat.S_IFLNK:
                raise bad(f"member {info.filename!r} is a symbolic link")
            if ftype not in (0, stat.S_IFREG, stat.S_IFDIR):
                raise bad(f"member {info.filename!r} is not a plain file or folder")
            if info.flag_bits & 0x1:
                raise bad(f"member {info.filename!r} is encrypted")
            if info.is_dir() or ftype == stat.S_IFDIR:
                writer.mkdir(parts)
                continue
            with zf.open(info) as member:
                writer.write(parts, _read_chunks(member))


def _extract_tar(fileobj: BinaryIO, kind: str, writer: _Writer) -> None:
    if kind == "tar.gz":
        raw = gzip.GzipFile(fileobj=fileobj, mode="rb")
    elif kind == "tar.bz2":
        raw = bz2.BZ2File(fileobj, mode="rb")
    elif kind == "tar.xz":
        raw = lzma.LZMAFile(fileobj, mode="rb")
    else:
        raw = fileobj
    # headers and padding need room beyond the file contents: one 512-byte header and up to 511
    # bytes of padding per member, plus long-name records
    budget = writer.limits.max_bytes + (writer.limits.max_files + 1) * 4096
    stream = _CountingReader(raw, budget, writer.limits)
    with tarfile.open(fileobj=stream, mode="r|") as tf:
        for member in tf:
            _check_deadline(writer.limits)
            parts = safe_parts(member.name)
            if member.issym():
                raise bad(f"member {member.name!r} is a symbolic link")
            if member.islnk():
                raise bad(f"member {member.name!r} is a hard link")
            if member.isdir():
                writer.mkdir(parts)
                continue
            if not member.isreg():
                raise bad(f"member {member.name!r} is a device, FIFO or other special file")
            data = tf.extractfile(member)
            if data is None:
                raise bad(f"member {member.name!r} has no data")
            writer.write(parts, _read_chunks(data))


def case_root(folder: Path) -> Path:
    """The folder holding baseline/ and target/: the archive root, or the single folder the
    archive wraps them in (e.g. case-07/)."""
    current = folder
    for _ in range(MAX_DEPTH):
        children = [p for p in current.iterdir() if not p.name.startswith(".") and p.name != "__MACOSX"]
        dirs = [p for p in children if p.is_dir()]
        if any(p.name.lower() in ROLE_DIRS for p in dirs):
            return current
        if len(dirs) == 1 and len(children) == 1:
            current = dirs[0]
            continue
        break
    raise ServiceError(422, "not_a_case",
                       "the archive holds no case layout: expected baseline/ and target/ run folders "
                       "(at its root or inside one top folder)")
