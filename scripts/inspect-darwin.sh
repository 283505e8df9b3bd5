#!/usr/bin/env bash
# macOS binaries cannot run here: inspect them instead. For each of
# pi-native.darwin-{arm64,x64}.node: a Mach-O 64-bit dynamically linked shared library (dylib)
# of the right architecture, exporting _napi_register_module_v1, whose every undefined symbol
# is provided by libSystem (the only library it links) — the N-API symbols are resolved at
# load time by napi-rs, so none may be undefined.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
TBD="$(python3 -c 'import ziglang, os; print(os.path.dirname(ziglang.__file__))')/lib/libc/darwin/libSystem.tbd"
test -f "$TBD" || { echo "zig's libSystem.tbd not found (scripts/cross-toolchain.sh installs ziglang)" >&2; exit 1; }
check() { # file, arch word as `file` prints it
  local f=$1 arch=$2
  echo "== $f"
  if [ ! -f "$f" ]; then echo "   FAIL: missing (run scripts/build-targets.sh)"; status=1; return; fi
  local kind; kind=$(file -b "$f")
  echo "   ${kind%%,*}"
  case "$kind" in "Mach-O 64-bit $arch dynamically linked shared library"*) ;; *) echo "   FAIL: not a $arch Mach-O dylib"; status=1 ;; esac
  if llvm-nm -g --defined-only "$f" | grep -q ' _napi_register_module_v1$'; then
    echo "   exports _napi_register_module_v1"
  else echo "   FAIL: _napi_register_module_v1 not exported"; status=1; fi
  # Load commands: libSystem, plus libiconv/libcharset that the libc crate names on Apple
  # (both ship in every macOS /usr/lib; no symbol binds to them, checked below).
  local libs; libs=$(llvm-objdump --macho --private-headers "$f" | awk '/cmd LC_LOAD(_WEAK)?_DYLIB/ {getline; getline; print $2}')
  echo "   loads: $(echo $libs)"
  for l in $libs; do
    case "$l" in /usr/lib/libSystem.B.dylib | /usr/lib/libiconv.2.dylib | /usr/lib/libcharset.1.dylib) ;;
      *) echo "   FAIL: loads $l"; status=1 ;; esac
  done
  # Every undefined symbol is bound (two-level namespace) to the library that provides it.
  local undef binds others
  undef=$(llvm-nm -u "$f" | awk '{print $NF}' | sort -u)
  binds=$( (llvm-objdump --macho --bind "$f" | awk '$3 ~ /^0x/ && NF>=7 {print $6, $7}'
            llvm-objdump --macho --lazy-bind "$f" | awk '$3 ~ /^0x/ && NF>=5 {print $4, $5}') | sort -u)
  others=$(echo "$binds" | awk '$1 != "libSystem"' )
  echo "   undefined symbols: $(echo "$undef" | grep -c .), bound to libSystem: $(echo "$binds" | awk '$1 == "libSystem" {print $2}' | sort -u | grep -c .)"
  if echo "$undef" | grep -q '^_napi_'; then echo "   FAIL: N-API symbols left undefined"; status=1; fi
  if [ -n "$others" ]; then echo "   FAIL: symbols bound outside libSystem:"; echo "$others" | head; status=1; fi
  # And every undefined symbol, bound or not (a symbol of dead-stripped code stays undefined
  # without a binding), is one libSystem exports: zig's libSystem.tbd is the export list.
  local missing=0
  for sym in $undef; do
    grep -qwF -- "$sym" "$TBD" || { echo "   FAIL: $sym is not exported by libSystem"; missing=1; status=1; }
  done
  [ $missing = 0 ] && echo "   every undefined symbol is in libSystem's export list"
  if [ "$arch" = arm64 ]; then
    if llvm-objdump --macho --private-headers "$f" | grep -q LC_CODE_SIGNATURE; then
      echo "   ad-hoc code signature present (required on Apple silicon)"
    else echo "   FAIL: no code signature"; status=1; fi
  fi
}
check pi-native.darwin-arm64.node arm64
check pi-native.darwin-x64.node x86_64
exit $status
