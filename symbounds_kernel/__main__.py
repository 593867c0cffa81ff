"""``python -m symbounds_kernel CERT.json``: exit 0 accepted, 1 rejected, 2 unreadable."""

import sys

from . import Unreadable, check_file


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m symbounds_kernel CERT.json", file=sys.stderr)
        return 2
    try:
        ok, reason = check_file(args[0])
    except Unreadable as e:
        print(f"symbounds_kernel: unreadable: {e}", file=sys.stderr)
        return 2
    print(f"{'accepted' if ok else 'rejected'}: {reason}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
