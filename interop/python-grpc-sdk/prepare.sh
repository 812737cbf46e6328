#!/usr/bin/env bash
# Builds the RocketMQ 5 gRPC SDK for Python harness: a virtual environment
# under target/interop/python-grpc-sdk/venv with the official SDK
# (rocketmq-python-client, pinned at 5.1.2 with every dependency in
# requirements.txt, installed with --no-deps so nothing else is resolved),
# and a copy of the self-checking cases in this directory
# (target/interop/python-grpc-sdk/harness/cases.py). Skips the work when the
# inputs (these files and the python3 interpreter) are unchanged since the last
# time (their hash is kept next to READY). PyPI must be reachable the first
# time; python3 with the venv module must be on PATH (tested with 3.11).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out="$here/../../target/interop/python-grpc-sdk"
mkdir -p "$out"
# The interpreter (path and version) is an input too: the venv is made from it.
hash=$( (cd "$here" && cat requirements.txt ./*.py prepare.sh
  python3 -c 'import sys; print(sys.executable, sys.version)') | sha256sum | cut -d' ' -f1)
if [ -f "$out/READY" ] && [ -x "$out/venv/bin/python" ] && [ "$(cat "$out/inputs.sha256" 2>/dev/null)" = "$hash" ]; then
  exit 0
fi
rm -f "$out/READY"
rm -rf "$out/venv" "$out/harness"
python3 -m venv "$out/venv"
"$out/venv/bin/python" -m pip install --quiet --disable-pip-version-check \
  --no-deps --requirement "$here/requirements.txt"
# The pins must be complete and consistent with each other.
"$out/venv/bin/python" -m pip check --disable-pip-version-check
mkdir -p "$out/harness"
cp "$here"/*.py "$out/harness/"
# The SDK and the cases must import. Importing the SDK makes its log
# directory under $HOME, so HOME is a scratch directory for this.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
HOME="$scratch" "$out/venv/bin/python" "$out/harness/cases.py" --list >/dev/null
echo "$hash" >"$out/inputs.sha256"
"$out/venv/bin/python" -c 'import sys; from importlib.metadata import version; print(sys.version.split()[0], "rocketmq-python-client", version("rocketmq-python-client"))' >"$out/READY"
