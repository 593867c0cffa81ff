#!/bin/sh
# Mutation testing of the checker kernel (docs/mutation-testing.md, "The checker kernel").
#
#   sh tests/kernel/mutmut.sh                 every mutant of symbounds_kernel/
#   sh tests/kernel/mutmut.sh "symbounds_kernel.read.*"   the mutants of one module
#   KERNEL_MUTMUT_TESTS=tests/kernel/test_kernel_graph.py sh tests/kernel/mutmut.sh "symbounds_kernel.graph.*"
#                                             one module against its own test file (the selection's default: tests/kernel)
#   KERNEL_MUTMUT_K="..."                     pytest's -k expression instead of the default below
#
# mutmut reads its configuration from the working directory's pyproject.toml, and the project's
# configures the mutation of symbounds/core; so this copies the sources and tests into a scratch
# directory ($KERNEL_MUTMUT_DIR, default /tmp/symbounds-kernel-mutmut) with a configuration of its
# own, and runs there (niced, one child: the machine is shared; $KERNEL_MUTMUT_NICE, default 19).  Read the results with
# `cd $KERNEL_MUTMUT_DIR && mutmut results` and `mutmut show NAME`.
set -eu
work="${KERNEL_MUTMUT_DIR:-/tmp/symbounds-kernel-mutmut}"
rm -rf "$work"
mkdir -p "$work"
cp -r symbounds symbounds_kernel tests "$work"/
cat > "$work/pyproject.toml" <<CONF
[tool.mutmut]
source_paths = ["symbounds_kernel/"]
also_copy = ["symbounds/", "tests/"]
pytest_add_cli_args_test_selection = ["${KERNEL_MUTMUT_TESTS:-tests/kernel}"]
# left out: the two slowest tests (a 1141-box certificate, three fresh certify runs), which reach
# nothing the small certificate does not, symbounds check's report of both verdicts (33 s: the
# kernel's verdict on the small certificate, which test_accepts_every_stored_certificate checks),
# and the two that read the sources themselves (mutmut's copies import mutmut and are longer)
pytest_add_cli_args = ["-p", "no:cacheprovider", "-m", "not slow", "-k",
    "${KERNEL_MUTMUT_K:-not v0.1-d2 and not prover_writes and not check_reports_both and not imports_nothing and not line_count}"]

[tool.pytest.ini_options]
testpaths = ["tests"]
markers = ["slow: long runs"]
CONF
cd "$work"
env -u PYTHONPATH nice -n "${KERNEL_MUTMUT_NICE:-19}" "${MUTMUT:-mutmut}" run --max-children 1 "$@"
