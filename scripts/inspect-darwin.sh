#!/usr/bin/env bash
# macOS binaries cannot run here: inspect them instead. For each of
# pi-native.darwin-{arm64,x64}.node: a Mach-O 64-bit dynamically linked shared library (dylib)
# of the right architecture, exporting _napi_register_module_v1, whose every undefined symbol
# is provided by libSystem (the only library it links) — the N-API symbols are resolved at
# load time by napi-rs, so none may be undefined.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
check() { # file, arch word from `file`, llvm arch name
  local f=$1 arch=$2
  echo "== $f"
  if [ ! -f "$f" ]; then echo "missing (run scripts/build-targets.sh)"; status=1; return; fi
  local kind; kind=$(file -b "$f")
  echo "   $kind"
  case "$kind" in "Mach-O 64-bit dynamically linked shared library $arch"*) ;; *) echo "   FAIL: not a $arch Mach-O dylib"; status=1 ;; esac
  if llvm-nm -g --defined-only "$f" | grep -q ' _napi_register_module_v1$'; then
    echo "   exports _napi_register_module_v1"
  else echo "   FAIL: _napi_register_module_v1 not exported"; status=1; fi
  local libs; libs=$(llvm-objdump --macho --dylibs-used "$f" | tail -n +2 | awk '{print $1}')
  echo "   links: $(echo $libs)"
  for l in $libs; do
    case "$l" in /usr/lib/libSystem.B.dylib) ;; *) echo "   FAIL: links $l"; status=1 ;; esac
  done
  # Every undefined symbol must come from libSystem (two-level namespace: bound to a library).
  local undef bad
  undef=$(llvm-nm -u "$f" | awk '{print $NF}' | sort -u)
  echo "   undefined symbols: $(echo "$undef" | grep -c .)"
  bad=$(llvm-objdump --macho --bind --lazy-bind --weak-bind "$f" 2>/dev/null | awk 'NF>=6 && $1 ~ /^__/ {print $(NF-1), $NF}' | grep -v '^libSystem ' || true)
  if echo "$undef" | grep -q '^_napi_'; then echo "   FAIL: N-API symbols left undefined"; status=1; fi
  if [ -n "$bad" ]; then echo "   FAIL: symbols bound outside libSystem:"; echo "$bad" | head; status=1; fi
}
check pi-native.darwin-arm64.node arm64
check pi-native.darwin-x64.node x86_64
exit $status
