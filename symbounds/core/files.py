"""Files the tool reads and writes: one atomic writer, one bounded reader of a user's file.

The writer goes through a temporary file in the same folder and renames it over the target, so
an interrupted or failed write never leaves a partial file over an earlier good one.  The new
file gets the mode of the file it replaces, or else ``0666`` less the umask (as ``open`` would
give): ``tempfile.mkstemp`` alone would leave every written file at ``0600``.
:func:`check_writable` tells, before any work, whether that write can succeed.

The reader (:func:`read_user_file`; :func:`read_user_text`, :func:`read_json_file` on top of
it) takes regular files only and reads at most its limit plus one byte, whatever the file
reports: a device such as ``/dev/zero``, a FIFO or a pipe reports size 0 and never ends, so it
is refused before a byte is read, and a file that grows while it is read stops at the limit.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile

__all__ = ["atomic_write", "check_writable", "read_user_file", "read_user_text", "read_json_file", "MAX_FILE"]

MAX_FILE = 512 * 2**20


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _mode_for(path: str) -> int:
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return 0o666 & ~_umask()


def atomic_write(path: str, data: str | bytes) -> None:
    """Write ``data`` (text, UTF-8; or bytes) to ``path`` atomically, honouring the umask."""
    folder = os.path.dirname(os.path.abspath(path))
    mode = _mode_for(path)
    fd, tmp = tempfile.mkstemp(prefix=".symbounds-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO or pipe"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a plain file"


def _size_text(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 2**20 and n % 2**20 == 0 else f"{n} bytes"


def read_user_file(path: str, error, max_size: int = MAX_FILE) -> bytes:
    """The bytes of the user's file ``path``, at most ``max_size`` of them; every failure is one
    line, ``error(message)``: missing or unreadable, not a regular file (a folder, a FIFO or pipe,
    a device), larger than ``max_size``.

    Never trusts a reported size: the file is checked to be regular before it is opened (opening
    a device may act on it) and again on the open descriptor (the path may have changed), opened
    without blocking (a FIFO without a writer would block ``open`` forever), then read in chunks
    until the end or ``max_size + 1`` bytes."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{path}: not a regular file ({_kind(st.st_mode)})")
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise error(f"{path}: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{path}: not a regular file ({_kind(st.st_mode)})")
        os.set_blocking(fd, True)
        chunks, n = [], 0
        while n <= max_size:
            chunk = os.read(fd, min(1 << 20, max_size + 1 - n))
            if not chunk:
                break
            chunks.append(chunk)
            n += len(chunk)
    except OSError as e:
        raise error(f"{path}: {e.strerror or e}") from None
    finally:
        os.close(fd)
    if n > max_size:
        raise error(f"{path}: file too large (more than {_size_text(max_size)})")
    return b"".join(chunks)


def read_user_text(path: str, error, max_size: int = MAX_FILE) -> str:
    """:func:`read_user_file` decoded as UTF-8 (``error`` when it is not)."""
    data = read_user_file(path, error, max_size)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise error(f"{path}: not a UTF-8 text file") from None


def read_json_file(path: str, error, parse_float=None, parse_constant=None, max_size: int = MAX_FILE):
    """``json.loads`` of a user's file read by :func:`read_user_text`, every failure turned into
    one-line ``error(message)``: unreadable, not a regular file, too large, not JSON, nested too
    deeply; ``parse_float``/``parse_constant`` decide what JSON floats and NaN/Infinity become (or
    raise ``error``)."""
    text = read_user_text(path, error, max_size)
    try:
        return json.loads(text, parse_float=parse_float, parse_constant=parse_constant)
    except json.JSONDecodeError as e:
        raise error(f"{path}: not valid JSON ({str(e).splitlines()[0]})") from None
    except RecursionError:
        raise error(f"{path}: JSON nested too deeply") from None


def check_writable(path: str, error) -> None:
    """Before any work: can :func:`atomic_write` put a file at ``path``?  ``error(message)``, one
    line, when ``path`` is a folder or another non-regular file (the rename would fail, or
    replace a device node), when its folder does not exist, or when no file can be created there
    (tried: a temporary file is made and removed, which also holds for root and read-only
    mounts, where permission bits say nothing)."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise error(f"{path}: folder {folder} does not exist")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise error(f"{path}: {e.strerror or e}") from None
    else:
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{path}: cannot write over {_kind(st.st_mode)}; name a file")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".symbounds-", suffix=".tmp", dir=folder)
    except OSError as e:
        raise error(f"{path}: cannot write in folder {folder} ({e.strerror or e})") from None
    os.close(fd)
    os.unlink(tmp)
