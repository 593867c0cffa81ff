"""``python -m symbounds_kernel [--workers N] CERT.json``: exit 0 accepted, 1 rejected, 2 unreadable."""

import sys

from . import Unreadable, check_file


def main(argv=None) -> int:
    args = sys.argv[1:] if argv is None else argv
    workers = 1
    if len(args) == 3 and args[0] == "--workers" and args[1].isdigit() and 1 <= int(args[1]) <= 256:
        workers, args = int(args[1]), args[2:]
    if len(args) != 1 or args[0].startswith("--"):
        print("usage: python -m symbounds_kernel [--workers N (1..256)] CERT.json", file=sys.stderr)
        return 2
    try:
        ok, reason = check_file(args[0], workers=workers)
    except Unreadable as e:
        print(f"symbounds_kernel: unreadable: {e}", file=sys.stderr)
        return 2
    print(f"{'accepted' if ok else 'rejected'}: {reason}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
