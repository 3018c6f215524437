#!/usr/bin/env bash
# Creates the project's Python venv (.venv) with the real test peers and clients:
# sushy-tools (Redfish emulator) and the official kubernetes client.
source "$(dirname "$0")/lib.sh"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
"$VENV/bin/pip" install -q --disable-pip-version-check 'sushy-tools==2.2.0' 'kubernetes>=30'
