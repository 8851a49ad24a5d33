#!/usr/bin/env bash
# Fetches and unpacks the Debian source package PACKAGE at exactly VERSION into DEST (which must
# not exist yet), with the machine's own apt sources turned into source entries. It uses apt
# state of its own under DEST.apt/, so neither the system's apt configuration nor its package
# lists change, and it runs without root.
# usage: fetch_debian_source.sh PACKAGE VERSION DEST   (DEST: absent, or an empty directory)
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: $0 PACKAGE VERSION DEST" >&2
  exit 2
fi
package=$1 version=$2 dest=$3
if [ -d "$dest" ] && [ -z "$(ls -A "$dest")" ]; then
  rmdir "$dest"  # CMake's ExternalProject creates the source directory ahead of the download
fi
if [ -e "$dest" ]; then
  echo "fetch_debian_source: $dest already exists and is not empty" >&2
  exit 2
fi
for tool in apt-get dpkg-source; do
  if ! command -v "$tool" >/dev/null; then
    echo "fetch_debian_source: $tool is missing (Debian's apt and dpkg-dev)" >&2
    exit 1
  fi
done
state=$dest.apt
rm -rf "$state"
mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/sources.list.d" "$state/work"

# The machine's sources, as source entries: one-line files and deb822 files alike.
found=0
if [ -f /etc/apt/sources.list ]; then
  sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' /etc/apt/sources.list > "$state/sources.list"
  [ -s "$state/sources.list" ] && found=1
else
  : > "$state/sources.list"
fi
for f in /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] || continue
  sed -n 's/^[[:space:]]*deb[[:space:]]/deb-src /p' "$f" > "$state/sources.list.d/$(basename "$f")"
  [ -s "$state/sources.list.d/$(basename "$f")" ] && found=1
done
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  sed 's/^Types:.*$/Types: deb-src/' "$f" > "$state/sources.list.d/$(basename "$f")"
  found=1
done
if [ $found = 0 ]; then
  echo "fetch_debian_source: no apt sources configured on this machine" >&2
  exit 1
fi

apt_opts=(-o "Dir::Etc::SourceList=$state/sources.list"
          -o "Dir::Etc::SourceParts=$state/sources.list.d"
          -o "Dir::State::Lists=$state/lists"
          -o "Dir::Cache=$state/cache"
          -o "Debug::NoLocking=1"
          -o "APT::Sandbox::User=$(id -un)")
echo "fetch_debian_source: fetching $package $version"
if ! apt-get -qq "${apt_opts[@]}" update >"$state/update.log" 2>&1; then
  cat "$state/update.log" >&2
  echo "fetch_debian_source: apt-get update (source entries) failed" >&2
  exit 1
fi
if ! (cd "$state/work" && apt-get -qq "${apt_opts[@]}" source "$package=$version") \
    >"$state/source.log" 2>&1; then
  cat "$state/source.log" >&2
  echo "fetch_debian_source: apt-get source $package=$version failed" >&2
  exit 1
fi
unpacked=$(find "$state/work" -mindepth 1 -maxdepth 1 -type d | head -n 1)
if [ -z "$unpacked" ]; then
  echo "fetch_debian_source: apt-get source left no unpacked tree" >&2
  exit 1
fi
mv "$unpacked" "$dest"
rm -rf "$state"
echo "fetch_debian_source: $package $version unpacked in $dest"
