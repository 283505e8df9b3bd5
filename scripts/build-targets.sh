#!/usr/bin/env bash
# Builds pi-native for every supported target into the package root, under the file names the
# generated loader (index.js) looks for:
#
#   x86_64-unknown-linux-gnu        → pi-native.linux-x64-gnu.node   (glibc ≥ 2.17)
#   aarch64-unknown-linux-gnu       → pi-native.linux-arm64-gnu.node (glibc ≥ 2.17)
#   x86_64-unknown-linux-musl       → pi-native.linux-x64-musl.node  (Alpine; musl linked
#   aarch64-unknown-linux-musl      → pi-native.linux-arm64-musl.node dynamically)
#   x86_64-pc-windows-gnu           → pi-native.win32-x64-msvc.node  (loads into the official,
#                                     MSVC-built node.exe, which asks for the -msvc name)
#   aarch64-apple-darwin            → pi-native.darwin-arm64.node
#   x86_64-apple-darwin             → pi-native.darwin-x64.node
#
#   scripts/build-targets.sh [target ...]   # default: all seven
#
# Every target links with zig through cargo-zigbuild (install them with
# scripts/cross-toolchain.sh); the gnu targets against glibc 2.17's symbols (the `.2.17` suffix),
# so the binaries load on any glibc since 2.17, not only on one as new as this machine's.
# x86_64-unknown-linux-gnu uses the rustup toolchain and its prebuilt std (the release
# workflow's Rust); the others Debian's Rust 1.96 with -Zbuild-std (rustup here has no other
# std). Their build directory lives in the cache folder outside the clone
# ($PI_NATIVE_CROSS_CACHE/target), so rebuilds and CI runs in fresh clones are incremental.
# PI_NATIVE_CROSS_TARGET_DIR names another one: two checkouts of different commits that build on
# one machine at once (a branch's worktree beside main's) must not share it, or one could copy
# the other's artifact. `npm run build` (napi build, the host toolchain, the clone's target/)
# stays the development build: it also regenerates index.js and index.d.ts, and its binary
# needs this machine's glibc; this script's replaces it with the one that ships.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

eval "$(scripts/cross-toolchain.sh)"
TARGET_DIR="${PI_NATIVE_CROSS_TARGET_DIR:-$PI_NATIVE_CROSS_CACHE/target}"
mkdir -p "$TARGET_DIR"
ALL=(x86_64-unknown-linux-gnu aarch64-unknown-linux-gnu x86_64-unknown-linux-musl aarch64-unknown-linux-musl
  x86_64-pc-windows-gnu aarch64-apple-darwin x86_64-apple-darwin)
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL[@]}")

# The platform-arch-abi suffix the loader requires for each target.
suffix() {
  case "$1" in
    x86_64-unknown-linux-gnu) echo linux-x64-gnu ;;
    aarch64-unknown-linux-gnu) echo linux-arm64-gnu ;;
    x86_64-unknown-linux-musl) echo linux-x64-musl ;;
    aarch64-unknown-linux-musl) echo linux-arm64-musl ;;
    x86_64-pc-windows-gnu) echo win32-x64-msvc ;;
    aarch64-apple-darwin) echo darwin-arm64 ;;
    x86_64-apple-darwin) echo darwin-x64 ;;
    *) echo "unknown target $1" >&2; return 1 ;;
  esac
}

# What cargo produces for the cdylib on each target.
artifact() {
  case "$1" in
    *-linux-*) echo libpi_native.so ;;
    *-windows-*) echo pi_native.dll ;;
    *-apple-*) echo libpi_native.dylib ;;
  esac
}

for t in "${TARGETS[@]}"; do
  out="pi-native.$(suffix "$t").node"
  start=$(date +%s)
  zt="$t"
  strip=symbols
  # Apple: rustc strips with rust-objcopy, which Debian's Rust lacks, and a strip after
  # linking would break the ad-hoc code signature arm64 macOS requires: keep symbols.
  case "$t" in *-apple-*) strip=false ;; esac
  case "$t" in *-linux-gnu) zt="$t.2.17" ;; esac # pin the glibc floor
  log="$TARGET_DIR/build-$t.log"
  if ! (
    export CARGO_TARGET_DIR="$TARGET_DIR" CARGO_PROFILE_RELEASE_STRIP=$strip
    if [ "$t" = x86_64-unknown-linux-gnu ]; then
      cargo-zigbuild build --release --target "$zt"
    else
      export PATH="/usr/bin:$PATH" RUSTC_BOOTSTRAP=1
      cargo-zigbuild build --release --target "$zt" -Zbuild-std=std,panic_abort
    fi
  ) >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "build of $t failed (full log: $log)" >&2
    exit 1
  fi
  # Through a temp name and a rename: a process loading the old binary meanwhile sees it whole.
  cp "$TARGET_DIR/$t/release/$(artifact "$t")" "$ROOT/$out.tmp"
  mv -f "$ROOT/$out.tmp" "$ROOT/$out"
  echo "built $t -> $out in $(( $(date +%s) - start ))s ($(stat -c %s "$ROOT/$out") bytes)"
done
