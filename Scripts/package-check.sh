#!/usr/bin/env bash
# CI's check of the Debian package (issue 40; docs/ARCHITECTURE.md, "The package"), as root:
#   builds it (Scripts/package.sh), checks its Depends and lintian (no errors), installs it with
#   `apt-get install ./kidledger_….deb`, checks with ldd that /usr/bin/kidledger needs nothing of
#   the Swift toolchain, validates the desktop entry, checks `--version`, runs the two-laptops job
#   with /usr/bin/kidledger, the installed man page and bash completion, reinstalls (an upgrade),
#   then purges the package and checks that a home's data is untouched.
# Exit 77 (a skip, with its reason on stderr) where not root: installing needs root.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "package check: SKIPPED: installing a .deb needs root (run as root, or sudo Scripts/package-check.sh)" >&2
  exit 77
fi
if dpkg-query -W -f='${Status}' kidledger 2>/dev/null | grep -q "install ok installed"; then
  echo "package check: kidledger is installed already; remove it first (apt-get purge kidledger)" >&2
  exit 75
fi
fail() { echo "package check: FAILED: $*" >&2; exit 1; }
step() { printf '\npackage check: %s\n' "$*"; }
tools=()
for t in lintian:lintian desktop-file-validate:desktop-file-utils man:man-db groff:groff-base dpkg-shlibdeps:dpkg-dev; do
  command -v "${t%%:*}" >/dev/null || tools+=("${t#*:}")
done
if [ ${#tools[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${tools[@]}" >/dev/null
fi

step "building the package"
deb="$(Scripts/package.sh | tail -n 1)"
[ -f "$deb" ] || fail "Scripts/package.sh made no .deb"
version="$(dpkg-deb -f "$deb" Version)"
depends="$(dpkg-deb -f "$deb" Depends)"
echo "$deb: version $version; Depends: $depends"
names="$(echo "$depends" | tr ',' '\n' | sed 's/(.*)//; s/ //g' | sort | tr '\n' ' ')"
[ "$names" = "libc6 liblmdb0 libqrencode4 libsodium23 " ] \
  || fail "Depends names $names; expected Debian's liblmdb0, libsodium23 and libqrencode4 (and libc6)"

step "lintian (no errors)"
lintian --fail-on error --tag-display-limit 0 "$deb" || fail "lintian reports errors"

step "installing with apt-get"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "./$deb" >/dev/null
trap 'DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq kidledger >/dev/null 2>&1 || true' EXIT
[ "$(/usr/bin/kidledger --version)" = "kidledger $version" ] || fail "kidledger --version says $(/usr/bin/kidledger --version), the package $version"
ldd /usr/bin/kidledger
if ldd /usr/bin/kidledger | grep -Ei 'swift|/opt/|libFoundation|libdispatch|BlocksRuntime|libicu|not found'; then
  fail "/usr/bin/kidledger needs a library of the Swift toolchain (above)"
fi
desktop-file-validate /usr/share/applications/kidledger.desktop || fail "desktop-file-validate"
grep -qx 'Exec=kidledger open' /usr/share/applications/kidledger.desktop || fail "the desktop entry does not run kidledger open"
grep -q '^ExecStart=/usr/bin/kidledger ' /usr/lib/systemd/user/kidledger.service || fail "the user unit does not run /usr/bin/kidledger"
if command -v systemd-analyze >/dev/null; then
  # As Scripts/check-unit.sh: --user needs a runtime directory even offline; any line printed fails.
  runtime="$(mktemp -d /tmp/kidledger-package-runtime.XXXXXX)"
  output="$(XDG_RUNTIME_DIR="$runtime" systemd-analyze --user verify /usr/lib/systemd/user/kidledger.service 2>&1)" || true
  rm -rf "$runtime"
  [ -z "$output" ] || fail "systemd-analyze --user verify kidledger.service: $output"
fi
test -s /usr/share/icons/hicolor/scalable/apps/kidledger.svg || fail "no icon"

step "the two-laptops job with /usr/bin/kidledger"
KIDLEDGER_BIN=/usr/bin/kidledger Scripts/two-laptops.sh > /tmp/kidledger-package-two-laptops.log 2>&1 \
  || { tail -n 40 /tmp/kidledger-package-two-laptops.log >&2; fail "two-laptops with /usr/bin/kidledger"; }
tail -n 3 /tmp/kidledger-package-two-laptops.log

step "the man page and bash completion"
page="$(MANPAGER=cat MANWIDTH=100 man kidledger 2>/dev/null)" || fail "man kidledger"
for command in "init NAME" "give" "open" "serve" "service install"; do
  grep -q "^ *$command" <<<"$page" || fail "the man page has no $command"
done
[ "$(man -w kidledger)" = /usr/share/man/man1/kidledger.1.gz ] || fail "man -w kidledger: $(man -w kidledger)"
complete_words() {
  bash -c 'source /usr/share/bash-completion/completions/kidledger
    COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); COMPREPLY=(); _kidledger; echo "${COMPREPLY[*]}"' _ "$@"
}
[ "$(complete_words kidledger chi)" = "child children" ] || fail "completion of 'kidledger chi': $(complete_words kidledger chi)"
[ "$(complete_words kidledger child a)" = "add archive" ] || fail "completion of 'kidledger child a': $(complete_words kidledger child a)"
[[ " $(complete_words kidledger give --n) " == *" --note "* ]] || fail "completion of 'kidledger give --n'"
echo "man page: $(wc -l <<<"$page") lines; completion: child children / add archive / --note"

step "an upgrade and a purge leave a home's data"
home="$(mktemp -d /tmp/kidledger-package-home.XXXXXX)"
/usr/bin/kidledger --home "$home" init "Package check" >/dev/null
/usr/bin/kidledger --home "$home" child add Ava >/dev/null
/usr/bin/kidledger --home "$home" give Ava 5 >/dev/null
# Every file but the lock files, which a read may touch.
snapshot() { (cd "$home" && find . -type f ! -name '*lock*' -print0 | sort -z | xargs -0 sha256sum); }
before="$(snapshot)"
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --reinstall "./$deb" >/dev/null
[ "$(/usr/bin/kidledger --home "$home" --json balance Ava)" = '{"balanceCents":500,"child":"Ava"}' ] \
  || /usr/bin/kidledger --home "$home" balance Ava | grep -q '5\.00' || fail "the home after an upgrade: $(/usr/bin/kidledger --home "$home" balance Ava)"
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq kidledger >/dev/null
trap - EXIT
[ ! -e /usr/bin/kidledger ] || fail "/usr/bin/kidledger is left after the purge"
after="$(snapshot)"
[ "$before" = "$after" ] || fail "the home changed across the upgrade and purge"
echo "the home's $(wc -l <<<"$after") files are unchanged after the upgrade and the purge"
rm -rf "$home"
echo "package check: passed ($deb)"
