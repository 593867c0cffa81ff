"""Files as benchmark folders ship them: plain, or gzip-compressed (``.gz``), both read bounded.

:func:`read_shipped` reads at most ``limit`` bytes of the file (:func:`symbounds.core.files.read_user_file`)
and, for a ``.gz`` name, produces at most ``limit`` decompressed bytes: the decompressor is asked
for no more than the bytes still allowed, so a small file that would expand to gigabytes (a gzip
bomb) is refused with one line after at most ``limit + 1`` bytes were produced.  Concatenated
gzip members are read one after the other.
"""

from __future__ import annotations

import zlib

from .files import read_user_file

__all__ = ["read_shipped"]


def read_shipped(path: str, error, limit: int) -> bytes:
    """The bytes of ``path``, decompressed when the name ends in ``.gz``; at most ``limit`` bytes
    read and at most ``limit`` produced, else ``error(one line)``."""
    data = read_user_file(path, error, limit)
    if not path.endswith(".gz"):
        return data
    if data[:2] != b"\x1f\x8b":
        raise error(f"{path}: not a gzip file (the name ends in .gz)")
    out, n = [], 0
    rest = data
    try:
        while rest:
            d = zlib.decompressobj(wbits=31)
            chunk = d.decompress(rest, limit + 1 - n)
            while True:
                out.append(chunk)
                n += len(chunk)
                if n > limit:
                    raise error(f"{path}: decompresses to more than {limit >> 20} MiB (refused)")
                if d.eof or not d.unconsumed_tail:
                    break
                chunk = d.decompress(d.unconsumed_tail, limit + 1 - n)
            if not d.eof:
                raise error(f"{path}: the gzip data ends early (truncated file)")
            rest = d.unused_data  # a further gzip member, as concatenated .gz files have
            if rest[:2] != b"\x1f\x8b":
                break
    except zlib.error as e:
        raise error(f"{path}: not valid gzip data ({str(e)[:60]})") from None
    return b"".join(out)
