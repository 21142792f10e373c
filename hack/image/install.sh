#!/bin/sh
# install.sh WHEELS PREFIX: a virtual environment at PREFIX with admitter installed from WHEELS
# alone (nothing fetched). Used by the Containerfile's runtime stage and by
# tests/integration/test_image_install.py.
set -eu
python3 -m venv "$2"
"$2/bin/pip" install --quiet --no-index --find-links "$1" admitter
