"""Writing gradient traces (.sgtrace, version 1; format in perf/data/README.md, reader in
perf/lib/trace.cpp) and measuring their densities.

Each worker's fp32 gradient is rounded to bf16 and only its non-zero blocks are stored, as a
zlib stream of the block bitmap, the values' high bytes and their low bytes.
"""
import struct
import zlib

import numpy as np

MAGIC = b"SPCTRACE"
END_MAGIC = b"SPCTEND\0"
VERSION = 1
VALUE_BF16 = 2


def bf16_round(grad):
    """fp32 -> bf16 bits (round to nearest even), and the fp32 values those bits stand for."""
    u = grad.view(np.uint32).astype(np.uint64)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return bits, (bits.astype(np.uint32) << 16).view(np.float32)


def encode_record(bits, values, block):
    """Raw payload: block bitmap, then high bytes, then low bytes of the non-zero blocks' bf16 values.
    Returns (non-zero block count, payload, per-block non-zero mask)."""
    n = values.size
    nblocks = (n + block - 1) // block
    padded = np.zeros(nblocks * block, dtype=np.float32)
    padded[:n] = values
    nz = (padded.reshape(nblocks, block) != 0).any(axis=1)
    bitmap = np.packbits(nz, bitorder="little").tobytes()
    mask = np.repeat(nz, block)[:n]
    kept = bits[mask]
    raw = bitmap + (kept >> 8).astype(np.uint8).tobytes() + (kept & 0xFF).astype(np.uint8).tobytes()
    return int(nz.sum()), raw, nz


def compress(raw):
    """A record's payload as stored (compressed as soon as it is made: a transformer record is
    37 MB raw)."""
    return zlib.compress(raw, 9)


def parameter_blocks(nonzero, off, cnt, block):
    """Per block overlapping [off, off + cnt): whether the parameter has a non-zero element in it."""
    first, last = off // block, (off + cnt - 1) // block
    pad = np.zeros((last - first + 1) * block, dtype=bool)
    pad[off - first * block: off - first * block + cnt] = nonzero[off: off + cnt]
    return pad.reshape(-1, block).any(axis=1)


def write(path, workers, steps, block, n_elements, description, offsets, records):
    """Writes the file; `offsets` are (name, offset, count) in flattened order, `records`
    (step, worker, non-zero blocks, compress(payload)) step-major. Returns the file's bytes."""
    head = bytearray()
    head += MAGIC + struct.pack("<IIIIQI", VERSION, workers, steps, block, n_elements, VALUE_BF16)
    d = description.encode("utf-8")
    head += struct.pack("<I", len(d)) + d
    head += struct.pack("<I", len(offsets))
    for name, off, cnt in offsets:
        nb = name.encode("utf-8")
        head += struct.pack("<I", len(nb)) + nb + struct.pack("<QQ", off, cnt)
    body = bytearray(head)
    for s, w, nz_blocks, comp in records:
        body += struct.pack("<IIII", s, w, nz_blocks, len(comp)) + comp
    body += struct.pack("<I", zlib.crc32(bytes(body)) & 0xFFFFFFFF) + END_MAGIC
    with open(path, "wb") as f:
        f.write(body)
    return bytes(body)
