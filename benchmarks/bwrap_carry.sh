#!/usr/bin/env bash
# Copies this machine's bubblewrap (the OS sandbox Argus runs untrusted code in,
# docs/security.md) into .whl/bwrap/, with the shared libraries it needs beyond glibc and a
# wrapper that finds them, for a machine that lacks it (the lent GPU image has no bwrap,
# and no network to install one). benchmarks/on_device.sh uses it there when the machine
# has no bwrap of its own, by setting ARGUS_BWRAP.
#   bash benchmarks/bwrap_carry.sh && <device run with carry [".whl"]>
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(command -v bwrap) || { echo "bwrap is not installed here (apt-get install bubblewrap)" >&2; exit 1; }
dest=.whl/bwrap
rm -rf "$dest"
mkdir -p "$dest"
cp "$src" "$dest/bwrap-real"
# the libraries outside glibc's own (those the other machine's glibc provides)
ldd "$src" | awk '/=> \// {print $3}' | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so.*|libm.so.*|libdl.so.*|libpthread.so.*|librt.so.*|ld-linux*) ;;
    *) cp "$lib" "$dest/" ;;
  esac
done
cat >"$dest/bwrap" <<'SH'
#!/bin/sh
d=$(dirname "$(readlink -f "$0")")
if "$d/bwrap-real" --version >/dev/null 2>&1; then exec "$d/bwrap-real" "$@"; fi
LD_LIBRARY_PATH="$d" exec "$d/bwrap-real" "$@"
SH
chmod +x "$dest/bwrap" "$dest/bwrap-real"
"$dest/bwrap" --version
du -sh "$dest"
