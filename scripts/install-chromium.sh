#!/usr/bin/env bash
# Make a headless Chromium and its chromedriver available for the HTML report's browser tests:
# Debian's chromium and chromium-driver packages, installed with apt-get when this user is
# root. Prints the browser's path. Nothing is downloaded outside the distribution's own packages.
set -euo pipefail
find_browser() { command -v chromium || command -v chromium-browser || command -v google-chrome || true; }
find_driver() { command -v chromedriver || ls /usr/lib/chromium/chromedriver 2>/dev/null || true; }
browser=$(find_browser)
if [ -z "$browser" ] || [ -z "$(find_driver)" ]; then
    if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
        echo "no chromium, and cannot install it (needs root and apt-get): apt-get install chromium" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends chromium chromium-driver >&2
    browser=$(find_browser)
fi
[ -n "$browser" ] || { echo "chromium did not install" >&2; exit 1; }
echo "$browser"
