#!/bin/sh
# Run as an ExecStartPost= of boxmaker-brokerd@alice.service (a test-only drop-in),
# so as the owner with brokerd's sandbox: rootless podman loads the tools image
# into the owner's storage and runs one container, as brokerd's runner would.
# $1: the tools image id.  Prints "BXSD-ROOTLESS 42" when the container ran.
set -eu
podman load --quiet -i /srv/tools.tar >/dev/null
podman --runtime runc run --rm --network=none --read-only --cap-drop=all \
    --security-opt=no-new-privileges --userns=keep-id --user "$(id -u):$(id -g)" \
    "$1" python3 -c 'print("BXSD-ROOTLESS", 6 * 7)'
