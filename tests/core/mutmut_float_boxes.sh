#!/bin/sh
# Mutation testing of the float box pass, symbounds/core/float_boxes.py
# (docs/mutation-testing.md, "Fourth pass: a fresh run over float_boxes.py").
#
#   sh tests/core/mutmut_float_boxes.sh                      every mutant of float_boxes.py
#   sh tests/core/mutmut_float_boxes.sh "symbounds.core.float_boxes.x__softmax*"   some of them
#   FLOAT_BOXES_MUTATE="float_boxes.py layers.py evaluator.py float_layers.py" \
#       sh tests/core/mutmut_float_boxes.sh "symbounds.core.layers.*"
#       the layers the float pass walks as an evaluator (docs/mutation-testing.md, "After the
#       float pass became an evaluator of the layers"): other files of symbounds/core mutated too
#
# mutmut reads its configuration from the working directory's pyproject.toml, and the project's
# mutates all of symbounds/core against all of tests/core; so this copies the sources and tests into
# a scratch directory ($FLOAT_BOXES_MUTMUT_DIR, default /tmp/symbounds-float-boxes-mutmut) with a
# configuration of its own, and runs there (niced, one child: the machine is shared).  Read the
# results with `cd $FLOAT_BOXES_MUTMUT_DIR && mutmut results` and `mutmut show NAME`.
set -eu
work="${FLOAT_BOXES_MUTMUT_DIR:-/tmp/symbounds-float-boxes-mutmut}"
rm -rf "$work"
mkdir -p "$work"
cp -r symbounds tests README.md docs "$work"/
only=""
for f in ${FLOAT_BOXES_MUTATE:-float_boxes.py}; do
    only="$only${only:+, }\"symbounds/core/$f\""
done
cat > "$work/pyproject.toml" <<CONF
[tool.mutmut]
source_paths = ["symbounds/"]
only_mutate = [$only]
CONF
cat >> "$work/pyproject.toml" <<'CONF'
also_copy = ["tests/", "README.md", "docs/"]
# the tests written for the float box pass, and those that walk the layers with both evaluators
# (test_walker.py), the scalar forward pass (test_transformer.py), the shared softmax weights the
# layers read (test_shared_trace.py) and the tests written for this evaluator; left out are its four slowest tests (the [SL26]
# network at d = 2 and d = 1, 30 s and 3 s, and the two random-network sweeps, 6 s and 5 s), which
# reach no line the smaller networks and the hand-worked operation tests do not
pytest_add_cli_args_test_selection = [
    "tests/core/test_float_boxes.py",
    "tests/core/test_float_boxes_mutants.py",
    "tests/core/test_outward_error_bounds.py",
    "tests/core/test_walker.py",
    "tests/core/test_transformer.py",
    "tests/core/test_shared_trace.py",
    "tests/core/test_float_ops_mutants.py",
]
pytest_add_cli_args = ["-x", "-p", "no:cacheprovider", "-m", "not slow", "-k",
    "not test_shi_liao_float_ranges_contain_ball_values and not test_random_networks_float_enclosures"]

[tool.pytest.ini_options]
testpaths = ["tests"]
markers = ["slow: long runs"]
CONF
cd "$work"
env -u PYTHONPATH nice -n "${NICE:-19}" "${MUTMUT:-mutmut}" run --max-children 1 "$@"
