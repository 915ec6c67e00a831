#!/usr/bin/env bash
# Builds the Debian package kidledger_VERSION_amd64.deb from this checkout (docs/ARCHITECTURE.md,
# "The package"):
#   - a release build of kidledger with the Swift runtime and Foundation linked statically, and
#     libstdc++/libgcc too, so it needs no Swift toolchain: only libc and Debian's liblmdb0,
#     libsodium23 and libqrencode4 (Depends: computed by dpkg-shlibdeps from the binary itself);
#   - /usr/bin/kidledger, the desktop entry "Kid Ledger" (runs `kidledger open`) and its SVG icon,
#     the systemd user unit /usr/lib/systemd/user/kidledger.service, kidledger(1) and bash
#     completion, the last three printed by kidledger-package from the program's own command table;
#   - /usr/share/doc/kidledger: copyright and changelog.gz.
# The version is KidLedgerVersion.current in Sources/KidLedgerDomain/KidLedgerVersion.swift (one place; `kidledger --version`
# prints it). No maintainer scripts: the package never touches a home (~/.kidledger), so removing,
# purging or upgrading it leaves every household's data.
#
#   Scripts/package.sh [OUTDIR]     (default: .build/package) prints the .deb's path last
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-.build/package}"
Scripts/setup.sh
command -v dpkg-shlibdeps >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq dpkg-dev >/dev/null

version="$(sed -n 's/^ *public static let current = "\([^"]*\)"$/\1/p' Sources/KidLedgerDomain/KidLedgerVersion.swift)"
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "package.sh: cannot read the version from KidLedgerVersion.swift (got '$version')" >&2; exit 70; }
# The changelog's date makes the build reproducible (man page date, file times).
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
date_rfc="$(date -u -d "@$SOURCE_DATE_EPOCH" -R)"
date_day="$(date -u -d "@$SOURCE_DATE_EPOCH" +%F)"

# libstdc++ and libgcc as archives: the Swift runtime's link line asks for -lstdc++, and a folder
# searched first that holds only libstdc++.a makes the linker take the static one.
static_cxx="$PWD/.build/static-cxx"
mkdir -p "$static_cxx"
ln -sf "$(g++ -print-file-name=libstdc++.a 2>/dev/null || gcc -print-file-name=libstdc++.a)" "$static_cxx/libstdc++.a"
[ -e "$static_cxx/libstdc++.a" ] || { echo "package.sh: libstdc++.a not found (apt-get install libstdc++-12-dev)" >&2; exit 69; }
# A scratch folder of its own: these link flags would otherwise make the next plain release build
# (Scripts/bench.sh, two-laptops.sh) start over.
flags=(-c release --scratch-path .build/package-scratch --static-swift-stdlib -Xlinker -L"$static_cxx" -Xswiftc -Xclang-linker -Xswiftc -static-libgcc)
for product in kidledger kidledger-package; do
  swift build "${flags[@]}" --product "$product" 2>&1 | tail -n 1
done
bin="$(swift build "${flags[@]}" --show-bin-path)"
[ "$("$bin/kidledger-package" version)" = "$version" ] || { echo "package.sh: kidledger-package disagrees on the version" >&2; exit 70; }

root="$(mktemp -d /tmp/kidledger-package.XXXXXX)"
trap 'rm -rf "$root"' EXIT
pkg="$root/kidledger"
install -d "$pkg/DEBIAN" "$pkg/usr/bin" "$pkg/usr/share/applications" "$pkg/usr/share/icons/hicolor/scalable/apps" \
  "$pkg/usr/lib/systemd/user" "$pkg/usr/share/man/man1" "$pkg/usr/share/bash-completion/completions" "$pkg/usr/share/doc/kidledger"
install -m 0755 "$bin/kidledger" "$pkg/usr/bin/kidledger"
strip --remove-section=.comment --remove-section=.note --strip-unneeded "$pkg/usr/bin/kidledger"
install -m 0644 packaging/kidledger.desktop "$pkg/usr/share/applications/kidledger.desktop"
install -m 0644 packaging/kidledger.svg "$pkg/usr/share/icons/hicolor/scalable/apps/kidledger.svg"
"$bin/kidledger-package" user-unit > "$pkg/usr/lib/systemd/user/kidledger.service"
"$bin/kidledger-package" man "$date_day" | gzip -9n > "$pkg/usr/share/man/man1/kidledger.1.gz"
"$bin/kidledger-package" bash-completion > "$pkg/usr/share/bash-completion/completions/kidledger"
install -m 0644 packaging/copyright "$pkg/usr/share/doc/kidledger/copyright"
cat > "$root/changelog" <<CHANGELOG
kidledger ($version) unstable; urgency=medium

  * Release $version: see the project's commit log.

 -- kidledger maintainers <kidledger@example.org>  $date_rfc
CHANGELOG
gzip -9n < "$root/changelog" > "$pkg/usr/share/doc/kidledger/changelog.gz"
chmod 0644 "$pkg"/usr/lib/systemd/user/* "$pkg"/usr/share/man/man1/* "$pkg"/usr/share/bash-completion/completions/* "$pkg"/usr/share/doc/kidledger/*

# Depends: from the binary's own needs (dpkg-shlibdeps reads a source package's debian/control).
mkdir -p "$root/src/debian"
printf 'Source: kidledger\n\nPackage: kidledger\nArchitecture: amd64\n' > "$root/src/debian/control"
depends="$(cd "$root/src" && dpkg-shlibdeps -O -e"$pkg/usr/bin/kidledger" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')"
[ -n "$depends" ] || { echo "package.sh: dpkg-shlibdeps found no dependencies" >&2; exit 70; }
size="$(du -sk --exclude=DEBIAN "$pkg" | cut -f1)"
cat > "$pkg/DEBIAN/control" <<CONTROL
Package: kidledger
Version: $version
Architecture: amd64
Maintainer: kidledger maintainers <kidledger@example.org>
Installed-Size: $size
Depends: $depends
Section: utils
Priority: optional
Homepage: https://github.com/kidledger/kidledger
Description: family allowance ledger, synced between the household's laptops
 Kid Ledger keeps each child's pocket money (balances, history, weekly
 allowances) on every laptop of the family and syncs them directly between
 the laptops on the home network, encrypted, with no server and no account.
 .
 "Kid Ledger" in the applications menu starts the user's service and opens
 the family page in the browser; the kidledger command does everything the
 page does.
CONTROL
(cd "$pkg" && find usr -type f -print0 | sort -z | xargs -0 md5sum) > "$pkg/DEBIAN/md5sums"
chmod 0644 "$pkg/DEBIAN/control" "$pkg/DEBIAN/md5sums"
find "$pkg" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
mkdir -p "$out"
deb="$out/kidledger_${version}_amd64.deb"
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null
echo "$deb"
