#!/usr/bin/env bash
# Installs OpenStack Ironic (standalone: SQLite, no message bus) into the project's venv, for the
# ironic provisioner's tests and the demo. Quick when the pinned version is already there.
source "$(dirname "$0")/lib.sh"
IRONIC_VERSION="${FERROMETAL_IRONIC_VERSION:-39.0.0}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
installed=$("$VENV/bin/python" - <<'PY' 2>/dev/null || true
from importlib.metadata import version
try:
    print(version("ironic"))
except Exception:
    pass
PY
)
if [ "$installed" = "$IRONIC_VERSION" ] && [ -x "$VENV/bin/ironic" ] && [ -x "$VENV/bin/ironic-dbsync" ]; then
  exit 0
fi
# sushy: the redfish hardware type's client library; ironic does not pull it in itself.
"$VENV/bin/pip" install -q --disable-pip-version-check "ironic==$IRONIC_VERSION" 'sushy'
