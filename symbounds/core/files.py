"""Files the tool reads and writes: one atomic writer, one reader of a user's JSON file.

The writer goes through a temporary file in the same folder and renames it over the target, so
an interrupted or failed write never leaves a partial file over an earlier good one.  The new
file gets the mode of the file it replaces, or else ``0666`` less the umask (as ``open`` would
give): ``tempfile.mkstemp`` alone would leave every written file at ``0600``.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile

__all__ = ["atomic_write", "read_json_file", "MAX_FILE"]

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


def read_json_file(path: str, error, parse_float=None, parse_constant=None, max_size: int = MAX_FILE):
    """``json.load`` of a user's file, every failure turned into one-line ``error(message)``:
    unreadable, too large, not JSON, nested too deeply; ``parse_float``/``parse_constant`` decide
    what JSON floats and NaN/Infinity become (or raise ``error``)."""
    try:
        size = os.path.getsize(path)
        if size > max_size:
            raise error(f"{path}: file too large ({size} bytes)")
        with open(path, encoding="utf-8") as f:
            return json.load(f, parse_float=parse_float, parse_constant=parse_constant)
    except OSError as e:
        raise error(f"{path}: {e.strerror or e}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise error(f"{path}: not valid JSON ({str(e).splitlines()[0]})") from None
    except RecursionError:
        raise error(f"{path}: JSON nested too deeply") from None
