#!/usr/bin/env bash
# Rewrites the device machine's absolute paths in benchmark output before it is recorded under
# bench/results/: the checkout's root becomes relative, the output folder becomes $OUT. Takes
# text files and .tgz/.tar.gz archives (archives inside archives too), in place.
# usage: ROOTS="CHECKOUT_ROOT/" OUTS="OUT_ROOT/" bench/scrub_paths.sh FILE...
#   ROOTS  the GPU machine's checkout roots to strip (with a trailing slash; as its logs show)
#   OUTS   its output folders, which become $OUT/
set -euo pipefail
roots=${ROOTS:?ROOTS: the checkout roots to strip} outs=${OUTS:?OUTS: the output folders}
scrub_text() {
  local r o
  for r in $roots; do sed -i "s#$r##g" "$1"; done
  for o in $outs; do sed -i "s#$o#\$OUT/#g" "$1"; done
}
scrub() {
  local f=$1 tmp
  case $f in
    *.tgz|*.tar.gz)
      tmp=$(mktemp -d)
      tar xzf "$f" -C "$tmp"
      while IFS= read -r -d '' g; do scrub "$g"; done < <(find "$tmp" -type f -print0)
      tar czf "$f.new" -C "$tmp" . && mv "$f.new" "$f"
      rm -rf "$tmp"
      ;;
    *) grep -Iq . "$f" 2>/dev/null && scrub_text "$f" || true ;;
  esac
}
for f in "$@"; do scrub "$f"; done
