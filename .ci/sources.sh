# .ci/sources.sh — sourced by the CI scripts that install the package from a copy of the
# sources and run tests against it beside other stages (.ci/sanitize_python.sh,
# .ci/other_pythons.sh): what such a copy leaves out, and which tests such a run leaves out.

# copy_sources DEST: the working tree (the current directory) into DEST, without build
# outputs: setuptools builds in the tree it is given and reuses object files in build/, so
# a build of another kind left there would leak into the install.
copy_sources() {
    mkdir -p "$1"
    tar --exclude=./build --exclude=./.git --exclude='*.so' --exclude='./*.egg-info' -cf - . |
        tar -xf - -C "$1"
}

# The pytest -k expression that leaves out the tests measuring how work grows with the
# input: they need the machine to themselves, which only stage 4 of .ci/run has.
not_timing_tests="not shape and not linear and not latency"
