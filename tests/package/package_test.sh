#!/usr/bin/env bash
# Builds the Debian package from a built tree and checks it:
#   1. cpack -G DEB; dpkg-deb -c lists every file it must hold and none it must not;
#      conffiles and maintainer scripts are in place; the unit starts /usr/bin/missiled.
#   2. `cmake --install` into a scratch DESTDIR keeps an existing missiled.toml and writes
#      the unit's ExecStart under the prefix it was given.
#   3. Only as root on a throwaway machine (CI=true, or MISSILE_PACKAGE_INSTALL=1): dpkg -i,
#      the installed files, the missile group, `missiled --check-config` on the installed
#      configuration, missile-run finding the installed shim, `systemd-analyze verify` on the
#      installed unit, an edited conffile kept across a reinstall, then dpkg --purge and every
#      file gone. Elsewhere this step is skipped with a message and exit status 77.
# Usage: package_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
source_dir=$(cd "$2" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

fail() { echo "package_test: FAIL: $*" >&2; exit 1; }
step() { echo "package_test: $*"; }

for tool in cpack dpkg-deb; do
  command -v "$tool" >/dev/null || fail "$tool not found (scripts/install-deps.sh installs it)"
done

step "building the package (cpack -G DEB)"
rm -f "$build"/package/*.deb
(cd "$build" && cpack -G DEB --config CPackConfig.cmake >"$scratch/cpack.log" 2>&1) ||
  { cat "$scratch/cpack.log" >&2; fail "cpack failed"; }
debs=("$build"/package/missile_*.deb)
[ -f "${debs[0]}" ] || fail "no package under $build/package"
deb=${debs[0]}
step "built $(basename "$deb") ($(du -k "$deb" | cut -f1) KiB)"

dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./|/|' >"$scratch/contents"
must_hold=(
  /usr/bin/missiled /usr/bin/missilectl /usr/bin/missile-run
  /usr/lib/missile/libmissile.so
  /usr/lib/systemd/system/missiled.service
  /etc/missile/missiled.toml
  /usr/lib/sysusers.d/missile.conf /usr/lib/tmpfiles.d/missile.conf
  /usr/share/man/man8/missiled.8.gz /usr/share/man/man1/missilectl.1.gz
  /usr/share/man/man1/missile-run.1.gz
  /usr/share/doc/missile/copyright /usr/share/doc/missile/README.md
  /usr/share/doc/missile/operations.md
)
if [ -x "$build/colorer/calibrate/missile-calibrate" ]; then
  must_hold+=(/usr/bin/missile-calibrate)
fi
if [ -x "$build/webhook/missile-webhook" ]; then
  must_hold+=(/usr/bin/missile-webhook /usr/share/man/man8/missile-webhook.8.gz)
fi
for f in "${must_hold[@]}"; do
  grep -qx "$f" "$scratch/contents" || fail "the package lacks $f"
done
# Never the driver test double, a libcuda.so.1 or test programs.
if grep -E 'fakecuda|libcuda|_test$|tenant_probe|/usr/local/' "$scratch/contents"; then
  fail "the package holds files it must not (above)"
fi
step "contents: the ${#must_hold[@]} expected files, no test double"

mkdir -p "$scratch/control" "$scratch/tree"
dpkg-deb -e "$deb" "$scratch/control"
grep -qx /etc/missile/missiled.toml "$scratch/control/conffiles" ||
  fail "/etc/missile/missiled.toml is not a conffile"
for script in postinst prerm postrm; do
  [ -x "$scratch/control/$script" ] || fail "no executable $script"
done
grep -q '^Depends:.*libgrpc' "$scratch/control/control" ||
  fail "Depends does not name the gRPC library: $(grep '^Depends' "$scratch/control/control")"
dpkg-deb -x "$deb" "$scratch/tree"
grep -qx 'ExecStart=/usr/bin/missiled' "$scratch/tree/usr/lib/systemd/system/missiled.service" ||
  fail "the packaged unit does not start /usr/bin/missiled"
cmp -s "$scratch/tree/etc/missile/missiled.toml" "$source_dir/deploy/missiled.toml" ||
  fail "the packaged configuration is not deploy/missiled.toml"
step "control: conffiles, maintainer scripts, Depends; unit ExecStart=/usr/bin/missiled"

step "cmake --install keeps an existing configuration"
dest="$scratch/destdir"
mkdir -p "$dest/etc/missile"
echo '# edited by the administrator' >"$dest/etc/missile/missiled.toml"
DESTDIR="$dest" cmake --install "$build" --prefix /opt/missile-test >"$scratch/install.log" 2>&1 ||
  { cat "$scratch/install.log" >&2; fail "cmake --install failed"; }
[ "$(cat "$dest/etc/missile/missiled.toml")" = '# edited by the administrator' ] ||
  fail "cmake --install overwrote an existing /etc/missile/missiled.toml"
grep -qx 'ExecStart=/opt/missile-test/bin/missiled' \
  "$dest/opt/missile-test/lib/systemd/system/missiled.service" ||
  fail "cmake --install --prefix /opt/missile-test: ExecStart does not follow the prefix"
[ -f "$dest/opt/missile-test/lib/missile/libmissile.so" ] || fail "no shim under lib/missile"

if [ "$(id -u)" -ne 0 ]; then
  echo "package_test: SKIPPED the install step (dpkg -i, --check-config, systemd-analyze verify," \
       "dpkg --purge): not root" >&2
  exit 77
fi
if [ "${CI:-}" != "true" ] && [ "${MISSILE_PACKAGE_INSTALL:-}" != "1" ]; then
  echo "package_test: SKIPPED the install step (dpkg -i, --check-config, systemd-analyze verify," \
       "dpkg --purge): it changes this machine; it runs where CI=true (a throwaway machine)" \
       "or MISSILE_PACKAGE_INSTALL=1" >&2
  exit 77
fi
if dpkg-query -W -f='${Status}' missile 2>/dev/null | grep -q 'install ok installed'; then
  echo "package_test: SKIPPED the install step: a missile package is installed here already" >&2
  exit 77
fi

step "dpkg -i $(basename "$deb")"
dpkg -i "$deb" >"$scratch/dpkg.log" 2>&1 || { cat "$scratch/dpkg.log" >&2; fail "dpkg -i failed"; }
for f in "${must_hold[@]}"; do
  [ -e "$f" ] || fail "$f is not installed"
done
getent group missile >/dev/null || fail "no missile group after install (sysusers.d)"
/usr/bin/missiled --check-config >"$scratch/check.out" 2>&1 ||
  { cat "$scratch/check.out" >&2; fail "missiled --check-config on the installed configuration"; }
grep -q '^daemon.socket = "/run/missile/missiled.sock"' "$scratch/check.out" ||
  fail "--check-config did not print the installed configuration"
preload=$(/usr/bin/missile-run --name probe --class be -- /usr/bin/printenv LD_PRELOAD)
[ "$preload" = /usr/lib/missile/libmissile.so ] ||
  fail "missile-run did not find the installed shim: LD_PRELOAD=$preload"
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify /usr/lib/systemd/system/missiled.service >"$scratch/verify.log" 2>&1 ||
    { cat "$scratch/verify.log" >&2; fail "systemd-analyze verify on the installed unit"; }
  step "systemd-analyze verify: OK"
else
  echo "package_test: systemd-analyze not found: the unit was not verified" >&2
fi

step "an edited conffile survives a reinstall"
echo '# edited' >>/etc/missile/missiled.toml
dpkg -i --force-confold "$deb" >"$scratch/dpkg2.log" 2>&1 ||
  { cat "$scratch/dpkg2.log" >&2; fail "dpkg -i (again) failed"; }
tail -n1 /etc/missile/missiled.toml | grep -qx '# edited' || fail "reinstalling replaced the edited configuration"

step "dpkg --purge missile"
dpkg --purge missile >"$scratch/purge.log" 2>&1 || { cat "$scratch/purge.log" >&2; fail "dpkg --purge failed"; }
for f in "${must_hold[@]}"; do
  [ ! -e "$f" ] || fail "$f is still there after purge"
done
[ ! -e /etc/missile ] || fail "/etc/missile is still there after purge"
step "OK"
