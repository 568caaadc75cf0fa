#!/usr/bin/env bash
# Installs the Debian 12 packages Strata needs. Idempotent and non-interactive:
# when every package is already installed it does nothing (no apt-get update).
# Run as root (or with sudo available).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libsimgrid-dev
  qt6-base-dev qt6-svg-dev libgl-dev
  libaio-dev liburing-dev libzstd-dev liblz4-dev libhwy-dev libxxhash-dev libssl-dev libeigen3-dev libopenblas-dev libjemalloc-dev libopenmpi-dev openmpi-bin fio
  python3
)

# --sanitizers: also clang and its sanitizer/libFuzzer runtimes
# (scripts/sanitize.sh).
if [ "${1:-}" = "--sanitizers" ]; then PACKAGES+=(clang libclang-rt-14-dev); fi
# --papers: what the papers/ scripts draw and read charts with (matplotlib,
# Pillow, poppler's pdftocairo and pdfimages).
if [ "${1:-}" = "--papers" ]; then PACKAGES+=(python3-matplotlib python3-pil poppler-utils); fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
