#!/bin/sh
# xla_venv.sh DIR - a Python virtual environment in DIR with the pinned JAX
# (jax and jaxlib 0.10.2, the XLA the project's comparisons were made with),
# for the XLA-backed tests (tools/test_xla_parse.sh, tools/test_xla_run.sh).
#
# Reuses DIR when its python already imports the pinned versions; otherwise
# creates it (python3 -m venv) and installs them with pip.  Prints the venv's
# python on stdout and exits 0 when it is ready; exits 1 with the reason on
# stderr when it cannot be had (no python3, no venv module, no network for
# pip), so that the caller can let the XLA tests skip.
#   py=$(sh tools/xla_venv.sh build/venv) && cmake ... -DSPMDC_XLA_PYTHON="$py"
set -u
JAX_VERSION=0.10.2
if [ $# -ne 1 ]; then
  echo "usage: xla_venv.sh DIR" >&2
  exit 2
fi
dir=$1
py="$dir/bin/python"
check='import jax, jaxlib, sys; sys.exit(0 if jax.__version__ == jaxlib.__version__ == "'$JAX_VERSION'" else 1)'
if [ -x "$py" ] && "$py" -c "$check" >/dev/null 2>&1; then
  (cd "$dir" && pwd -P | sed 's|$|/bin/python|')
  exit 0
fi
if ! command -v python3 >/dev/null 2>&1; then
  echo "xla_venv.sh: no python3; the XLA tests will be skipped" >&2
  exit 1
fi
if [ ! -x "$py" ] && ! python3 -m venv "$dir" >&2; then
  echo "xla_venv.sh: python3 -m venv $dir failed; the XLA tests will be skipped" >&2
  exit 1
fi
echo "xla_venv.sh: installing jax==$JAX_VERSION jaxlib==$JAX_VERSION into $dir" >&2
if ! "$py" -m pip install --quiet --disable-pip-version-check --retries 1 --timeout 30 \
    "jax==$JAX_VERSION" "jaxlib==$JAX_VERSION" >&2; then
  echo "xla_venv.sh: pip could not install jax (no network?); the XLA tests will be skipped" >&2
  exit 1
fi
if ! "$py" -c "$check" >&2; then
  echo "xla_venv.sh: $py does not import jax $JAX_VERSION; the XLA tests will be skipped" >&2
  exit 1
fi
(cd "$dir" && pwd -P | sed 's|$|/bin/python|')
