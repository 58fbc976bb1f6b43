#!/usr/bin/env bash
# Installs the Debian 12 packages lockstep builds and tests with, only those that are missing.
# Runs as root (or with sudo available); nothing is downloaded except through apt.
set -euo pipefail
pkgs=(build-essential make cmake pkg-config git python3 zlib1g-dev libicu-dev libre2-dev
      libsentencepiece-dev nlohmann-json3-dev libsimdjson-dev libboost-dev libgtest-dev
      libbenchmark-dev pybind11-dev python3-dev python3-numpy clang-14 libclang-rt-14-dev
      chromium)  # chromium: headless rendering test of `lockstep explain --html`
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
