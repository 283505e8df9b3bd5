#!/usr/bin/env bash
# Installs (when missing) everything needed to build pi-native for every target and to run the
# emulated suites, and generates the Windows link shims and the Wine ProcessPrng shim into a
# cache folder OUTSIDE the clone (reused by later runs and by CI in fresh clones).
#
#   scripts/cross-toolchain.sh          # idempotent; a second run takes about a second
#
# Needs root (or passwordless sudo) for apt-get when Debian packages are missing:
#   rustc-web cargo-web rust-web-src llvm qemu-user-static libc6-arm64-cross
#   libstdc++6-arm64-cross libgcc-s1-arm64-cross wine64 musl
# and pip for the PyPI packages ziglang and cargo-zigbuild.
#
# Cache folder: $PI_NATIVE_CROSS_CACHE, default /var/cache/pi-native-cross (root) or
# ~/.cache/pi-native-cross. Prints `export` lines for the environment the other scripts use.
set -euo pipefail

CACHE="${PI_NATIVE_CROSS_CACHE:-}"
if [ -z "$CACHE" ]; then
  if [ "$(id -u)" = 0 ]; then CACHE=/var/cache/pi-native-cross; else CACHE="$HOME/.cache/pi-native-cross"; fi
fi
mkdir -p "$CACHE"
log() { echo "cross-toolchain: $*" >&2; }

# --- Debian packages -------------------------------------------------------------------------
# musl: its libc.so is the export list scripts/inspect-linux.sh checks the musl binaries against.
APT_PKGS=(rustc-web cargo-web rust-web-src llvm qemu-user-static libc6-arm64-cross
  libstdc++6-arm64-cross libgcc-s1-arm64-cross wine64 musl)
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then SUDO="sudo -n"; else
      log "missing Debian packages: ${missing[*]}"
      log "installing them needs root: run this script as root (or with passwordless sudo)"
      exit 1
    fi
  fi
  log "apt-get install ${missing[*]}"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# --- PyPI: zig (cross C compiler/linker) and cargo-zigbuild ----------------------------------
if ! python3 -c 'import ziglang' 2>/dev/null || ! command -v cargo-zigbuild >/dev/null; then
  log "pip install ziglang cargo-zigbuild"
  python3 -m pip install -q ziglang cargo-zigbuild >&2
  hash -r
fi

# --- Windows link shims ----------------------------------------------------------------------
# napi-build links windows-gnu addons with -lnode and insists on $LIBNODE_PATH/libnode.dll;
# napi-rs resolves N-API symbols at run time, so an empty import library is enough. Rust's
# windows-gnu target also links -lssp_nonshared -lssp, which zig's MinGW lacks: empty archives.
SHIMS="$CACHE/win-link"
if [ ! -f "$SHIMS/.v2" ]; then
  log "generating Windows link shims in $SHIMS"
  rm -rf "$SHIMS" && mkdir -p "$SHIMS"
  printf 'LIBRARY node.exe\nEXPORTS\n' > "$SHIMS/node.def"
  python3 -m ziglang dlltool -d "$SHIMS/node.def" -l "$SHIMS/libnode.dll.a" -m i386:x86-64
  # zig's linker looks for -lnode as libnode.a (not libnode.dll.a).
  cp "$SHIMS/libnode.dll.a" "$SHIMS/libnode.a"
  : > "$SHIMS/libnode.dll"
  llvm-ar rcs "$SHIMS/libssp.a"
  llvm-ar rcs "$SHIMS/libssp_nonshared.a"
  touch "$SHIMS/.v2"
fi

# --- Wine ProcessPrng shim (tests under Wine 8 only) ------------------------------------------
# Rust's std imports ProcessPrng from bcryptprimitives.dll (Windows 10+), which Wine 8 lacks.
PRNG="$CACHE/wine-prng/bcryptprimitives.dll"
if [ ! -f "$PRNG" ]; then
  log "building the Wine ProcessPrng shim"
  mkdir -p "$(dirname "$PRNG")"
  cat > "$CACHE/wine-prng/prng.c" <<'C'
#include <windows.h>
#define SystemFunction036 NTAPI SystemFunction036
#include <ntsecapi.h>
#undef SystemFunction036
/* ProcessPrng (Windows 10+) on top of RtlGenRandom, for Wine 8. */
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  while (len > 0) {
    ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
    if (!RtlGenRandom(data, n)) return FALSE;
    data += n;
    len -= n;
  }
  return TRUE;
}
C
  python3 -m ziglang cc -target x86_64-windows-gnu -shared -O2 -o "$PRNG" \
    "$CACHE/wine-prng/prng.c" -ladvapi32
fi

echo "export PI_NATIVE_CROSS_CACHE=$CACHE"
echo "export LIBNODE_PATH=$SHIMS"
