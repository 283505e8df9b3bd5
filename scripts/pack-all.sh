#!/usr/bin/env bash
# Packs what scripts/build-targets.sh built:
#   - the fat tarball pi-native-<version>.tgz: JS, loader, fallback backend and every built
#     binary in one file, installable without a registry (`npm install ./pi-native-0.1.0.tgz`);
#   - one tarball per target from npm/<platform-arch-abi>/ (os/cpu/libc set), which the root
#     package names as optionalDependencies for installs from a registry.
#   scripts/pack-all.sh [OUT_DIR]     # default .cache/dist (ignored)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.cache/dist}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -f "$OUT"/*.tgz
for dir in npm/*/; do
  t=$(basename "$dir")
  bin="pi-native.$t.node"
  if [ -f "$bin" ]; then
    cp "$bin" "$dir/"
    (cd "$dir" && npm pack --silent --ignore-scripts --pack-destination "$OUT" >/dev/null)
    echo "packed $t"
  else
    echo "skipped $t (no $bin; run scripts/build-targets.sh)"
  fi
done
npm pack --silent --ignore-scripts --pack-destination "$OUT" >/dev/null
ls -l "$OUT"
