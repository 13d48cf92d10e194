#!/usr/bin/env bash
# Installs what lockmeter needs to build and test, on a fresh Debian machine with rustup.
# Idempotent: skips what is already there.
set -euo pipefail

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(gcc libc6-dev)
# binutils: objcopy and strip for the separate-debug-file tests.
command -v objcopy >/dev/null 2>&1 || need_apt+=(binutils)
# A font for `lockmeter plot --out F.png` (SVG needs none).
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need_apt+=(fonts-dejavu-core)
# Headless Chromium renders the HTML report in its end-to-end test.
command -v chromium >/dev/null 2>&1 || need_apt+=(chromium)
if [ ${#need_apt[@]} -gt 0 ]; then
    if command -v apt-get >/dev/null 2>&1; then
        echo "install: apt-get install ${need_apt[*]}"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
    else
        echo "install: please install ${need_apt[*]} (a C compiler for the end-to-end tests, a font for PNG plots, chromium for the HTML report test)" >&2
        exit 1
    fi
fi

if command -v rustup >/dev/null 2>&1; then
    for c in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$c" || rustup component add "$c"
    done
fi
