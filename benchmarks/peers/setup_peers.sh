#!/usr/bin/env bash
# Build the peer verifier (auto_LiRPA) in its own virtual environment, beside symbounds.
#
#   bash benchmarks/peers/setup_peers.sh /path/to/auto_LiRPA-checkout
#
# The checkout is a clone of auto_LiRPA's source repository (it is not on the package index for
# this Python). Measured in BENCHMARKS.md with commit
#   a050a3d61f4cb68b108fa7f07dcb3e4d7ef304df  ("May 2026 release", auto_LiRPA 0.7.1)
# Its setup.py pins torch < 2.9 and torchvision; the CPU torch 2.13.0 wheel is installed instead
# and auto_LiRPA goes in with --no-deps, followed by the runtime modules it imports (numpy,
# packaging, appdirs, pyyaml, tqdm, graphviz: the Python package only). Only package-index packages are downloaded; nothing of
# auto_LiRPA is copied into this repository. The environment is benchmarks/peers/.venv (ignored
# by git); symbounds is never installed into it.
set -euo pipefail
if [ $# -ne 1 ] || [ ! -f "$1/setup.py" ] || [ ! -d "$1/auto_LiRPA" ]; then
    echo "usage: $0 AUTO_LIRPA_CHECKOUT (a directory with setup.py and auto_LiRPA/)" >&2
    exit 2
fi
checkout=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
venv="$here/.venv"
python3 -m venv "$venv"
pip="$venv/bin/pip"
# CPU torch only: never let pip resolve a CUDA build.
"$pip" install --quiet 'torch==2.13.0+cpu'
"$venv/bin/python" -c "import torch, sys; sys.exit(0 if torch.version.cuda is None else 'a CUDA torch was installed')"
"$pip" install --quiet 'numpy>=1.20' 'packaging>=20.0' 'appdirs>=1.4' 'pyyaml>=5.0' 'tqdm>=4.64' 'graphviz>=0.20.3'
"$pip" install --quiet --no-deps "$checkout"
commit=$(git -C "$checkout" rev-parse HEAD 2>/dev/null || echo unknown)
"$venv/bin/python" - "$commit" <<'PY'
import sys, torch, auto_LiRPA
print(f"auto_LiRPA {auto_LiRPA.__version__} (commit {sys.argv[1]}), torch {torch.__version__}, "
      f"python {sys.version.split()[0]}: ready in benchmarks/peers/.venv")
PY
