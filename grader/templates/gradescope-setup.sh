#!/usr/bin/env bash
# Gradescope runs this once, as root, in /autograder/source, when it builds the image.
# It installs a Python the grader supports (3.11 or 3.12) and the grader with its pinned
# JAX into /autograder/source/.venv.  Written by `grade gradescope-bundle`.
set -euo pipefail
cd "$(dirname "$0")"
PY=""
for candidate in python3.11 python3.12; do
  if command -v "$candidate" >/dev/null 2>&1; then PY="$candidate"; break; fi
done
if [ -z "$PY" ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq python3.11 python3.11-venv >/dev/null
  PY=python3.11
fi
"$PY" -m venv .venv
.venv/bin/pip install --quiet --upgrade pip
.venv/bin/pip install --quiet .
# The sandbox runs learner code as an unprivileged user: it must be able to run this Python.
chmod -R a+rX .venv
