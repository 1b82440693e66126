#!/bin/bash
# Build OUT_DIR/site17.tar.xz (sglang 0.5.17 and what it needs on the H200 image) with the shared
# recipe ../shared/gpu/sglang-0.5.17/build-site.sh, packed with `xz -4 -T2` instead of its
# `xz -9e -T0`: on the 2-core machine about 2 min 20 s and 42.8 MB instead of 12-23 min, and it
# still fits the 64 MiB carry beside the checkout (about 19 MB tracked).
#
#   bash specstate/integration/build_site17.sh .whl17        (repository root; .whl17 git-excluded)
set -euo pipefail
SHARED=${SHARED_GPU:-../shared/gpu}/sglang-0.5.17
[ -f "$SHARED/build-site.sh" ] || { echo "build_site17: no $SHARED/build-site.sh (set SHARED_GPU to the shared gpu folder)"; exit 2; }
HERE=$(cd "$SHARED" && pwd)
T=$(mktemp)
trap 'rm -f "$T"' EXIT
sed -e 's/xz -9e -T0/xz -4 -T2/' -e "s#^HERE=.*#HERE=$HERE#" "$HERE/build-site.sh" > "$T"
grep -q 'xz -4 -T2' "$T" || { echo "build_site17: the shared recipe no longer packs with xz -9e -T0; read it and update this wrapper"; exit 2; }
bash "$T" "$@"
