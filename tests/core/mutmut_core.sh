#!/bin/sh
# Mutation testing of core modules with a fast test selection per module
# (docs/mutation-testing.md, "Fourth pass").
#
#   sh tests/core/mutmut_core.sh shared_softmax                       every mutant of shared_softmax.py
#   sh tests/core/mutmut_core.sh boxes certificate -- "symbounds.core.boxes.x_box_bounds__mutmut_*"
#
# Each name is a module of symbounds/core (shared_softmax, boxes, certificate); the arguments after
# `--` are mutmut's mutant-name patterns (default: every mutant of the modules named).  mutmut reads
# its configuration from the working directory's pyproject.toml, so this copies the project into a
# scratch directory ($CORE_MUTMUT_DIR, default /tmp/symbounds-core-mutmut-<modules>) with a
# `[tool.mutmut]` of its own: only the modules named are mutated, and only the tests that exercise
# them run (`-x`, `-m "not slow"`), niced, one child (the machine is shared).  Read the results
# with `cd DIR && mutmut results` and `mutmut show NAME`.  A second call with the same modules
# keeps the directory (and mutmut's results) unless CORE_MUTMUT_FRESH=1.
set -eu
mods=""
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    mods="$mods $1"
    shift
done
[ $# -gt 0 ] && shift
[ -n "$mods" ] || { echo "usage: sh tests/core/mutmut_core.sh MODULE... [-- PATTERN...]" >&2; exit 2; }

only=""
tests=""
boxes_tests=0
for m in $mods; do
    case "$m" in
        shared_softmax)
            # the shared softmax classes piece by piece, the shared trace, and the setup shortcuts
            # (with the property tests against a 300-bit evaluation)
            tests="$tests \"tests/core/test_shared_softmax_mutants.py\", \"tests/core/test_setup_shortcuts.py\",
    \"tests/core/test_shared_trace.py\"," ;;
        boxes|certificate)
            only="$only \"symbounds/core/$m.py\","
            [ $boxes_tests = 0 ] || continue
            boxes_tests=1
            # the certificate search and check: what reaches box_bounds, certify_model and
            # check_certificate (the 44-second float-target comparison and the CLI runs that kill
            # workers or send Ctrl-C left out: they reach nothing the others do not), and the fifth
            # pass's tests of the pieces of boxes.py (the boxes, the reprs, the side to halve)
            tests="$tests \"tests/core/test_check_mutants.py\", \"tests/core/test_certify.py\",
    \"tests/core/test_boxes_mutants.py\",
    \"tests/core/test_soundness_mutants.py\", \"tests/app/test_outputs.py\",
    \"tests/core/test_float_boxes.py::test_float_bounds_against_arb_bounds_and_point_errors_on_the_shi_liao_network\",
    \"tests/app/test_progress_and_files.py::test_certify_model_passes_the_exact_proved_volume\"," ;;
        *) echo "mutmut_core.sh: no test selection for module '$m'" >&2; exit 2 ;;
    esac
    [ "$m" != shared_softmax ] || only="$only \"symbounds/core/$m.py\","
    # the certificate file's helpers (fields, assumptions, writing, where a run's file goes),
    # each against a hand-worked case
    [ "$m" != certificate ] || tests="$tests \"tests/core/test_certificate_mutants.py\","
done

name=$(echo $mods | tr ' ' '-')
work="${CORE_MUTMUT_DIR:-/tmp/symbounds-core-mutmut-$name}"
if [ "${CORE_MUTMUT_FRESH:-0}" = 1 ] || [ ! -d "$work" ]; then
    rm -rf "$work"
    mkdir -p "$work"
    cp -r symbounds tests README.md docs "$work"/
    # no progress lines: on a loaded machine a check can pass the 5-second mark, and its progress
    # line would break the tests that expect exactly one line (a false kill)
    sed -i 's/^    INTERVAL = 5.0$/    INTERVAL = 1e9/' "$work/symbounds/app/args.py"
    grep -q 'INTERVAL = 1e9' "$work/symbounds/app/args.py"
    # the project's pyproject.toml up to its own [tool.mutmut], then this one
    sed '/^\[tool.mutmut\]/,$d' pyproject.toml > "$work/pyproject.toml"
    cat >> "$work/pyproject.toml" <<CONF
[tool.mutmut]
source_paths = ["symbounds/"]
only_mutate = [$only]
also_copy = ["README.md", "docs/"]
pytest_add_cli_args_test_selection = [$tests]
pytest_add_cli_args = ["-x", "-p", "no:cacheprovider", "-m", "not slow", "-k", "not dask and not v0.1-d2"]
CONF
fi
cd "$work"
env -u PYTHONPATH nice -n 19 "${MUTMUT:-mutmut}" run --max-children 1 "$@"
