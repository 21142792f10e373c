#!/bin/sh
# build-wheels.sh WHEELS SOURCE: admitter's wheel (its core compiled with mypyc, as `make setup`
# compiles it) and the wheels of what it needs at run time, into WHEELS. No extras: the image
# runs the controller, which needs no simulator plotting library. Used by the Containerfile's
# build stage and by tests/integration/test_image_install.py, so both install the same thing.
set -eu
python3 -m pip wheel --quiet --wheel-dir "$1" "$2"
