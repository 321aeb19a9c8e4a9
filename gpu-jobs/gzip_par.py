"""Issue 15: gzip a large file fast, as pigz does: one gzip member holding one deflate stream,
whose parts are compressed on every core (each part ends with a sync flush, the last with the
final block) and joined, with the whole file's CRC-32 and length in the trailer.

usage: python3 gzip_par.py IN OUT [LEVEL] [PART_MB]
"""
import os
import struct
import sys
import zlib
from multiprocessing import Pool

src, dst = sys.argv[1], sys.argv[2]
level = int(sys.argv[3]) if len(sys.argv) > 3 else 1
part = (int(sys.argv[4]) if len(sys.argv) > 4 else 32) << 20
size = os.path.getsize(src)
parts = max(1, -(-size // part))


def deflate(i):
    with open(src, "rb") as f:
        f.seek(i * part)
        data = f.read(part)
    c = zlib.compressobj(level, zlib.DEFLATED, -15)
    end = zlib.Z_FINISH if i == parts - 1 else zlib.Z_SYNC_FLUSH
    return c.compress(data) + c.flush(end)


with open(dst, "wb") as out, Pool() as pool:
    out.write(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff")
    for body in pool.imap(deflate, range(parts)):
        out.write(body)
    # The CRC-32 of the whole input, in one pass here: Python has no crc32_combine.
    crc = 0
    with open(src, "rb") as f:
        while block := f.read(1 << 24):
            crc = zlib.crc32(block, crc)
    out.write(struct.pack("<II", crc, size & 0xFFFFFFFF))
