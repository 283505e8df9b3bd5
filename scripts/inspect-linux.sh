#!/usr/bin/env bash
# Checks what the Linux binaries ask of the machine that loads them, from their ELF headers
# (GNU readelf, which reads every architecture's ELF; objdump -T shows the same versions):
#
#   pi-native.linux-{x64,arm64}-gnu.node   glibc ≥ 2.17: every version the binary requires of
#       glibc's libraries is at most GLIBC_2.17 (the highest is printed), and every undefined
#       symbol it needs (not weak) is bound to such a version: an unversioned one is a symbol
#       2.17 does not have (the zig link against 2.17's stubs could not version it), which an
#       older glibc fails to load with "undefined symbol".
#   pi-native.linux-{x64,arm64}-musl.node  musl: links no glibc library and requires no glibc
#       version; its only libc is musl (`libc.so`, which musl's loader answers with itself, as it
#       does libc.musl-<arch>.so.1), and every undefined symbol it needs is one musl exports
#       (the export list of Debian's musl 1.2.3 libc.so: symbol names are the same on every
#       architecture).
#   All four: an ELF64 shared object for the right machine, exporting napi_register_module_v1.
#   And where this machine can (a musl binary of its own architecture, Debian's musl and zig
#   installed, as scripts/cross-toolchain.sh does): loaded for real by musl's dynamic linker, from
#   a small musl program that dlopens it with RTLD_NOW (every symbol bound, initializers run) and
#   finds napi_register_module_v1. No Node for musl runs here; the release workflow's Alpine job
#   runs the suite on it.
#
#   scripts/inspect-linux.sh [binary ...]   # default: the four pi-native.linux-*.node present
set -euo pipefail
cd "$(dirname "$0")/.."
MAX_GLIBC=2.17
MUSL_LIBC=${PI_NATIVE_MUSL_LIBC:-/usr/lib/x86_64-linux-musl/libc.so}
FILES=("$@")
if [ ${#FILES[@]} -eq 0 ]; then
  FILES=(pi-native.linux-x64-gnu.node pi-native.linux-arm64-gnu.node pi-native.linux-x64-musl.node pi-native.linux-arm64-musl.node)
fi
status=0
fail() { echo "   FAIL: $*"; status=1; }

# version_le A B: true when glibc version A ≤ B (2.2.5 < 2.17).
version_le() { [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$1" ]; }

check() {
  local f=$1 name arch libc machine
  name=$(basename "$f")
  echo "== $f"
  if [ ! -f "$f" ]; then fail "missing (run scripts/build-targets.sh)"; return; fi
  case "$name" in
    *linux-x64-*) arch=x86_64 machine='Advanced Micro Devices X86-64' ;;
    *linux-arm64-*) arch=aarch64 machine='AArch64' ;;
    *) fail "not a pi-native.linux-<arch>-<libc>.node name"; return ;;
  esac
  case "$name" in *-gnu.node) libc=gnu ;; *-musl.node) libc=musl ;; *) fail "neither -gnu nor -musl"; return ;; esac

  local header
  header=$(readelf -h "$f" 2>&1) || { fail "not an ELF file: $header"; return; }
  grep -q 'Class: *ELF64' <<<"$header" || fail "not ELF64"
  grep -q 'Type: *DYN' <<<"$header" || fail "not a shared object"
  grep -q "Machine: *$machine" <<<"$header" && echo "   ELF64 shared object, $machine" || fail "machine is not $machine"

  local syms
  syms=$(readelf --dyn-syms -W "$f")
  # Num: Value Size Type Bind Vis Ndx Name
  if awk '$7 != "UND" && $8 == "napi_register_module_v1"' <<<"$syms" | grep -q .; then
    echo "   exports napi_register_module_v1"
  else fail "napi_register_module_v1 not exported"; fi

  local needed
  needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  echo "   needs: $(echo $needed)"
  # Undefined symbols the binary cannot load without (weak ones are null where absent).
  local strong
  strong=$(awk '$7 == "UND" && $5 != "WEAK" && $8 != "" {print $8}' <<<"$syms" | sort -u)
  local versions
  versions=$(readelf -V "$f" | { grep -o 'Name: GLIBC_[A-Z0-9._]*' || true; } | sed 's/^Name: //' | sort -uV)

  if [ $libc = gnu ]; then
    for l in $needed; do
      # glibc's libraries, and GCC's unwinder, which Node itself needs on every glibc system.
      case "$l" in libc.so.6 | libm.so.6 | libpthread.so.0 | libdl.so.2 | librt.so.1 | ld-linux-x86-64.so.2 | ld-linux-aarch64.so.1 | libgcc_s.so.1) ;;
        *) fail "needs $l (not part of glibc)" ;; esac
    done
    local max
    max=$(grep -v PRIVATE <<<"$versions" | sed 's/^GLIBC_//' | sort -V | tail -n 1)
    if [ -z "$max" ]; then fail "requires no GLIBC version at all (not linked against glibc?)"
    elif version_le "$max" "$MAX_GLIBC"; then echo "   highest glibc version required: GLIBC_$max (≤ $MAX_GLIBC)"
    else fail "requires GLIBC_$max (> $MAX_GLIBC): $(readelf --dyn-syms -W "$f" | awk -v v="GLIBC_$max" 'index($8, "@" v) {print $8}' | head -n 5 | tr '\n' ' ')"; fi
    if grep -q PRIVATE <<<"$versions"; then fail "requires GLIBC_PRIVATE"; fi
    local unversioned
    unversioned=$(grep -v '@' <<<"$strong" || true)
    if [ -n "$unversioned" ]; then fail "undefined symbols glibc $MAX_GLIBC does not version (missing there): $(echo $unversioned)"
    else echo "   every undefined symbol ($(grep -c . <<<"$strong")) is bound to a glibc version"; fi
  else
    for l in $needed; do
      case "$l" in libc.so | "libc.musl-$arch.so.1" | "ld-musl-$arch.so.1") ;;
        *) fail "needs $l (musl binaries need musl's libc only)" ;; esac
    done
    if [ -n "$versions" ]; then fail "requires glibc versions: $(echo $versions)"; fi
    if [ ! -f "$MUSL_LIBC" ]; then fail "$MUSL_LIBC missing (Debian package musl; scripts/cross-toolchain.sh installs it)"; return; fi
    local exports missing
    exports=$(readelf --dyn-syms -W "$MUSL_LIBC" | awk '$7 != "UND" && $8 != "" {sub(/@.*/, "", $8); print $8}' | sort -u)
    missing=$(comm -23 <(sed 's/@.*//' <<<"$strong" | sort -u) <(echo "$exports"))
    if [ -n "$missing" ]; then fail "undefined symbols musl does not export: $(echo $missing)"
    else echo "   every undefined symbol ($(grep -c . <<<"$strong")) is exported by musl ($MUSL_LIBC)"; fi
    if [ "$arch" = "$(uname -m)" ] && [ -e "/lib/ld-musl-$arch.so.1" ] && python3 -c 'import ziglang' 2>/dev/null; then
      local out
      if out=$(musl_loader "$arch" && "$WORK/load-$arch" "$(readlink -f "$f")" 2>&1); then
        echo "   loaded by musl's dynamic linker (dlopen RTLD_NOW; napi_register_module_v1 found)"
      else fail "musl's dynamic linker refused it: $out"; fi
    fi
  fi
}

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# A musl program that dlopens its argument with every symbol bound now (built once per run).
musl_loader() {
  [ -x "$WORK/load-$1" ] && return
  cat >"$WORK/load.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
  void *h = argc == 2 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : 0;
  if (!h) { puts(argc == 2 ? dlerror() : "usage: load FILE"); return 1; }
  if (!dlsym(h, "napi_register_module_v1")) { puts("napi_register_module_v1 not found"); return 1; }
  return 0;
}
C
  # Dynamic (dlopen needs musl's dynamic linker), without zig's sanitizer runtime, whose own
  # imports (statx, ...) Debian's older musl lacks.
  python3 -m ziglang cc -target "$1-linux-musl" -dynamic -O2 -fno-sanitize=all -s -o "$WORK/load-$1" "$WORK/load.c"
}

for f in "${FILES[@]}"; do check "$f"; done
exit $status
