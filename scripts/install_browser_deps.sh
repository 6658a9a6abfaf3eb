#!/usr/bin/env bash
# Installs what tests/test_browser.py needs: Debian's Chromium (Playwright's own browser
# download is not used) and a font so screenshots render sanely. Idempotent: it only
# installs what is missing, and says what it did.
#
#   bash scripts/install_browser_deps.sh
#
# Needs root and apt-get (Debian/Ubuntu). Elsewhere it prints what to install and exits 1
# when Chromium is missing, 0 when it is already there.
set -euo pipefail

CHROMIUM=/usr/bin/chromium
PACKAGES=()

if [ -x "$CHROMIUM" ]; then
    echo "install_browser_deps: Chromium already present: $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
else
    PACKAGES+=(chromium)
fi

# A font with broad coverage (the calculator prints ≈, ×, µ, ⚠); without any font
# Chromium renders empty boxes.
if ! fc-list 2>/dev/null | grep -qi "dejavu"; then
    PACKAGES+=(fonts-dejavu-core)
fi

if [ ${#PACKAGES[@]} -eq 0 ]; then
    echo "install_browser_deps: nothing to install"
    exit 0
fi

if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "install_browser_deps: missing ${PACKAGES[*]}, and this is not root with apt-get." >&2
    echo "  Debian/Ubuntu: sudo apt-get install ${PACKAGES[*]}" >&2
    if [ -x "$CHROMIUM" ]; then
        exit 0  # only fonts missing: the test still runs
    fi
    exit 1
fi

echo "install_browser_deps: installing ${PACKAGES[*]} with apt-get"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" fontconfig >/dev/null
echo "install_browser_deps: installed ${PACKAGES[*]}; $("$CHROMIUM" --version 2>/dev/null || echo "chromium: not found after install")"
test -x "$CHROMIUM"
