"""Kafka's compression codecs with Kafka's exact framing, and decompression bounded against bombs.

- gzip: one gzip member (Java's GZIPOutputStream); readers accept concatenated members as GZIPInputStream does.
- snappy: xerial ``SnappyOutputStream`` framing: an 8-byte magic ``\\x82SNAPPY\\x00``, int32 version 1,
  int32 compatible version 1, then blocks of (int32 big-endian length, raw snappy block) of at most 32 KiB of
  input each. Like ``SnappyInputStream``, a reader treats data without the magic as one raw snappy block.
- lz4: the LZ4 frame format as ``Lz4BlockOutputStream`` writes it: independent 64 KiB blocks, no block or
  content checksum, no content size, a correct header checksum (magic v2 never uses the broken v0 one).
- zstd: a plain zstd frame. Like zstd-jni's ``ZstdInputStream`` (Kafka's reader), a reader refuses a frame cut
  short ("Truncated source"); python-zstandard's streaming reader would return what it had decoded so far.
"""

from __future__ import annotations

import enum
import gzip
import struct
import zlib

import cramjam
import lz4.frame
import zstandard

from kraftlake.logformat.varint import VarintError, read_uvarint


class Compression(enum.IntEnum):
    """The codec id held in bits 0-2 of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


DEFAULT_MAX_DECOMPRESSED_BYTES = 64 * 1024 * 1024
"""Default cap on one batch's decompressed records (KRaft batches are at most 8 MiB)."""

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_ZSTD_MAX_WINDOW = 1 << 27


class DecompressError(ValueError):
    """Raised by `decompress` on invalid compressed data; the batch reader wraps it in a located error."""


class DecompressLimitError(DecompressError):
    """Raised by `decompress` when the output would exceed its limit."""


def compress(codec: Compression, data: bytes, level: int | None = None) -> bytes:
    """Compress `data` (a batch's records area) the way Kafka's producer-side stream for `codec` does."""
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return gzip.compress(data, compresslevel=6 if level is None else level, mtime=0)
    if codec == Compression.SNAPPY:
        out = bytearray(_XERIAL_HEADER)
        for start in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
            out += struct.pack(">i", len(block))
            out += block
        return bytes(out)
    if codec == Compression.LZ4:
        return bytes(
            lz4.frame.compress(
                data,
                compression_level=0 if level is None else level,
                block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                block_linked=False,
                content_checksum=False,
                block_checksum=False,
                store_size=False,
            )
        )
    if codec == Compression.ZSTD:
        return bytes(zstandard.ZstdCompressor(level=3 if level is None else level).compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def decompress(codec: Compression, data: bytes, limit: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> bytes:
    """Decompress `data`, producing at most `limit` bytes.

    Raises
    ------
    DecompressLimitError
        If the output would exceed `limit`.
    DecompressError
        If `data` is not valid for `codec`.
    """
    try:
        if codec == Compression.GZIP:
            return _gunzip(data, limit)
        if codec == Compression.SNAPPY:
            return _unsnappy(data, limit)
        if codec == Compression.LZ4:
            return _unlz4(data, limit)
        if codec == Compression.ZSTD:
            return _unzstd(data, limit)
    except DecompressError:
        raise
    except (
        zlib.error,
        zstandard.ZstdError,
        cramjam.DecompressionError,
        RuntimeError,
        ValueError,
        EOFError,
        OSError,
    ) as exc:
        raise DecompressError(f"invalid {codec.name.lower()} data: {exc}") from exc
    raise DecompressError(f"unknown compression codec id {int(codec)}")


def _over(limit: int) -> DecompressLimitError:
    return DecompressLimitError(f"decompressed size exceeds the limit of {limit} bytes")


def _gunzip(data: bytes, limit: int) -> bytes:
    out = bytearray()
    rest = bytes(data)
    while True:
        d = zlib.decompressobj(wbits=31)
        chunk = d.decompress(rest, limit + 1 - len(out))
        out += chunk
        if len(out) > limit:
            raise _over(limit)
        if not d.eof:
            if d.unconsumed_tail:
                raise _over(limit)
            raise DecompressError("gzip stream ends before its trailer")
        rest = d.unused_data
        if not rest:
            return bytes(out)


def _unsnappy(data: bytes, limit: int) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_block(data, limit)
    out = bytearray()
    pos = 0
    end = len(data)
    while pos < end:
        if data.startswith(XERIAL_MAGIC, pos):
            # a header, possibly of a concatenated stream, as SnappyInputStream accepts
            if pos + 16 > end:
                raise DecompressError("truncated xerial snappy header")
            pos += 16
            continue
        if pos + 4 > end:
            raise DecompressError("truncated xerial snappy block length")
        (n,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise DecompressError("xerial snappy block length runs past the end of the data")
        out += _snappy_block(data[pos : pos + n], limit, len(out))
        pos += n
    return bytes(out)


def _snappy_block(block: bytes, limit: int, done: int = 0) -> bytes:
    """One raw snappy block, refused when its declared size would take the output (``done`` bytes so far) past
    ``limit``."""
    try:
        size, _ = read_uvarint(block, 0, 5)
    except VarintError as exc:
        raise DecompressError(f"bad snappy block length: {exc}") from exc
    if done + size > limit:
        raise _over(limit)
    return bytes(cramjam.snappy.decompress_raw(block))


def _unlz4(data: bytes, limit: int) -> bytes:
    d = lz4.frame.LZ4FrameDecompressor()
    out = d.decompress(data, max_length=limit + 1)
    if len(out) > limit or (not d.eof and not d.needs_input):
        raise _over(limit)
    if not d.eof:
        raise DecompressError("lz4 frame ends before its end mark")
    if d.unused_data:
        raise DecompressError("trailing bytes after the lz4 frame")
    return bytes(out)


_ZSTD_MAGIC = 0xFD2FB528
_ZSTD_SKIPPABLE = 0x184D2A50  # to 0x184D2A5F


def _check_zstd_frames(data: bytes) -> None:
    """Refuse data that is not whole zstd frames: a frame cut anywhere (its header, a block, its checksum).

    Walks the frames' block headers (RFC 8878 section 3.1) without decompressing anything.
    """
    pos = 0
    end = len(data)
    while pos < end:
        if end - pos < 4:
            raise DecompressError(f"truncated zstd frame: {end - pos} bytes at {pos} are not a frame magic")
        magic = int.from_bytes(data[pos : pos + 4], "little")
        if magic & 0xFFFFFFF0 == _ZSTD_SKIPPABLE:
            if end - pos < 8:
                raise DecompressError(f"truncated zstd skippable frame at {pos}")
            pos += 8 + int.from_bytes(data[pos + 4 : pos + 8], "little")
            if pos > end:
                raise DecompressError(
                    "truncated zstd skippable frame: its size runs past the end of the data"
                )
            continue
        if magic != _ZSTD_MAGIC:
            raise DecompressError(f"unknown zstd frame descriptor {magic:#010x} at {pos}")
        try:
            header = zstandard.frame_header_size(data[pos : pos + 18])
        except zstandard.ZstdError as exc:
            raise DecompressError(f"truncated zstd frame header at {pos}: {exc}") from exc
        has_checksum = bool(data[pos + 4] & 0x04)
        pos += header
        while True:
            if end - pos < 3:
                raise DecompressError("truncated zstd frame: it ends before its last block")
            block = int.from_bytes(data[pos : pos + 3], "little")
            kind = (block >> 1) & 3
            if kind == 3:
                raise DecompressError(f"reserved zstd block type at {pos}")
            pos += 3 + (1 if kind == 1 else block >> 3)
            if pos > end:
                raise DecompressError("truncated zstd frame: a block runs past the end of the data")
            if block & 1:
                break
        if has_checksum:
            pos += 4
            if pos > end:
                raise DecompressError("truncated zstd frame: it ends inside its checksum")


_READ_CHUNK = 1 << 20


def _unzstd(data: bytes, limit: int) -> bytes:
    _check_zstd_frames(data)
    dctx = zstandard.ZstdDecompressor(max_window_size=_ZSTD_MAX_WINDOW)
    reader = dctx.stream_reader(data, read_across_frames=True)
    out = bytearray()
    while True:
        # in chunks: read(n) allocates n bytes up front, and n would be the whole cap (64 MiB) per batch
        chunk = reader.read(min(_READ_CHUNK, limit + 1 - len(out)))
        if not chunk:
            return bytes(out)
        out += chunk
        if len(out) > limit:
            raise _over(limit)
