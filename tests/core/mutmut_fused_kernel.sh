#!/bin/sh
# Mutation testing of the fused box kernel, symbounds/core/fused_boxes.py
# (docs/mutation-testing.md, "The fused box kernel").
#
#   sh tests/core/mutmut_fused_kernel.sh                                          every mutant
#   sh tests/core/mutmut_fused_kernel.sh "symbounds.core.fused_boxes.x__reciprocal_into*"   some
#
# The kernel runs as plain Python here (NUMBA_DISABLE_JIT=1: numba's njit returns the function
# itself), so mutmut's trampolines work and each mutant needs no compilation; the arithmetic is
# the same IEEE double arithmetic.  The sources and tests are copied into a scratch directory
# ($FUSED_MUTMUT_DIR, default /tmp/symbounds-fused-mutmut) with a configuration of its own, and
# mutmut runs there (niced, one child).  Read the results with `cd $FUSED_MUTMUT_DIR && mutmut
# results` and `mutmut show NAME`.
set -eu
work="${FUSED_MUTMUT_DIR:-/tmp/symbounds-fused-mutmut}"
rm -rf "$work"
mkdir -p "$work"
cp -r symbounds tests README.md docs "$work"/
cat > "$work/pyproject.toml" <<'CONF'
[tool.mutmut]
source_paths = ["symbounds/"]
only_mutate = ["symbounds/core/fused_boxes.py"]
also_copy = ["tests/", "README.md", "docs/"]
# the kernel's tests, without the fresh-process fallback test (it runs the NumPy pass only)
pytest_add_cli_args_test_selection = ["tests/core/test_fused_kernel.py"]
pytest_add_cli_args = ["-x", "-p", "no:cacheprovider", "-m", "not slow", "-k", "not without_numba"]

[tool.pytest.ini_options]
testpaths = ["tests"]
markers = ["slow: long runs"]
CONF
cd "$work"
env -u PYTHONPATH NUMBA_DISABLE_JIT=1 nice -n 19 "${MUTMUT:-mutmut}" run --max-children 1 "$@"
