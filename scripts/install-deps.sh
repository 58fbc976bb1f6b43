#!/usr/bin/env bash
# Installs the Debian 12 packages lockstep builds and tests with, only those that are missing.
# Runs as root (or with sudo available); nothing is downloaded except through apt.
set -euo pipefail
# --demo: only what building the libraries and the `lockstep` command needs (scripts/demo.sh);
# otherwise also the test frameworks, the Python module's, the sanitizer / fuzzer toolchain and
# chromium (the headless rendering test of `lockstep explain --html`).
pkgs=(build-essential cmake pkg-config python3 zlib1g-dev libicu-dev libre2-dev
      libsentencepiece-dev nlohmann-json3-dev libsimdjson-dev libboost-dev)
if [ "${1:-}" != "--demo" ]; then
  pkgs+=(make git libgtest-dev libbenchmark-dev pybind11-dev python3-dev python3-numpy clang-14
         libclang-rt-14-dev chromium)
fi
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
