#!/usr/bin/env bash
# Packs what scripts/build-targets.sh built, into OUT_DIR:
#   - pi-native-<version>.tgz, the fat tarball: JS, loader, fallback backend and every built
#     binary in one file, installable without a registry (`npm install ./pi-native-0.1.0.tgz`).
#     It names no optionalDependencies: a host that installed it must still pass `npm ci`, and
#     npm ci refuses a lockfile without entries for dependencies no registry has (yet).
#   - one tarball per target from npm/<platform-arch-abi>/ (os/cpu/libc set);
#   - registry/pi-native-<version>.tgz, the main package for a registry: the fat tarball's files
#     without binaries, naming the per-target packages (same version) as optionalDependencies,
#     so npm installs the one matching the platform. Publish it together with them.
#   scripts/pack-all.sh [OUT_DIR]     # default .cache/dist (ignored)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-.cache/dist}
mkdir -p "$OUT/registry"
OUT=$(cd "$OUT" && pwd)
rm -f "$OUT"/*.tgz "$OUT"/registry/*.tgz
for dir in npm/*/; do
  t=$(basename "$dir")
  bin="pi-native.$t.node"
  if [ -f "$bin" ]; then
    cp "$bin" "$dir/"
    # Each binary package says "license": "MIT": it carries the text too (npm packs LICENSE always).
    cp LICENSE "$dir/"
    (cd "$dir" && npm pack --silent --ignore-scripts --pack-destination "$OUT" >/dev/null)
    echo "packed $t"
  else
    echo "skipped $t (no $bin; run scripts/build-targets.sh)"
  fi
done
# With lifecycle scripts: prepack strips the build-from-source scripts from the packed manifest
# (and rebuilds the host binary only if it is older than its sources); postpack restores it.
FAT=$(npm pack --silent --pack-destination "$OUT" | tail -n 1)
STAGE=$(mktemp -d)
trap 'rm -rf "$STAGE"' EXIT
tar -xzf "$OUT/$FAT" -C "$STAGE"
rm -f "$STAGE"/package/*.node
node -e '
  const fs = require("node:fs")
  const [manifest, ...targets] = process.argv.slice(1)
  const pkg = JSON.parse(fs.readFileSync(manifest, "utf8"))
  pkg.optionalDependencies = {}
  for (const t of targets) {
    const sub = JSON.parse(fs.readFileSync(`npm/${t}/package.json`, "utf8"))
    if (sub.version !== pkg.version) throw new Error(`npm/${t} is at ${sub.version}, the package at ${pkg.version}`)
    pkg.optionalDependencies[sub.name] = sub.version
  }
  fs.writeFileSync(manifest, JSON.stringify(pkg, null, 2) + "\n")
' "$STAGE/package/package.json" $(ls npm)
(cd "$STAGE/package" && npm pack --silent --ignore-scripts --pack-destination "$OUT/registry" >/dev/null)
ls -l "$OUT" "$OUT/registry"
