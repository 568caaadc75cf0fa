#!/usr/bin/env bash
# Carries a CUDA build to a GPU machine that lacks the Debian packages
# (SimGrid, yaml-cpp, libaio, Highway, ...) and cannot install any: how
# scripts/gpu-check.sh runs on a lent H100 (Ubuntu 24.04).
#
#   scripts/gpu-bundle.sh pack OUT.tar.xz [BUILD_DIR]
#       here, after scripts/build.sh: the stripped binaries gpu-check.sh
#       runs (cli/strata, tests/executor_test, bench/gpu_bench, the
#       simulator's helper) and every library they and Open MPI's plugins
#       need except the C/C++ runtime and CUDA's (the GPU machine has its
#       own; Open MPI itself is the GPU machine's). About 16 MB.
#   scripts/gpu-bundle.sh run BUNDLE.tar.xz [COMMAND...]
#       there: unpacks under /opt/strata-bundle, keeps only the bundled
#       libraries the machine lacks (its own Open MPI 4.1 serves: comm.cc
#       loads libmpi by soname when the build's path is absent), finds
#       cuBLAS and NCCL, lays out /opt/strata-bundle/build/{cli,tests,bench,
#       simulator} and runs COMMAND (default: scripts/gpu-check.sh on that
#       build).
# Exit: the command's status; 2 on bad usage.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
case "${1:-}" in
pack)
  out=${2:?usage: gpu-bundle.sh pack OUT.tar.xz [BUILD_DIR]}
  build=${3:-$here/build}
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  mkdir -p "$root/bin" "$root/lib"
  for b in cli/strata tests/executor_test bench/gpu_bench simulator/strata-sim-worker; do
    strip -o "$root/bin/$(basename "$b")" "$build/$b"
  done
  ompi=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
  skip='linux-vdso|ld-linux|/libc\.so|/libm\.so|/libstdc\+\+|/libgcc_s|/libpthread|/libdl\.|/librt\.|/cuda'
  for o in "$root"/bin/* "$ompi"/*.so; do ldd "$o" 2>/dev/null | awk '/=>/ {print $3}'; done |
    grep -vE "$skip" | sort -u | while read -r l; do cp -L "$l" "$root/lib/"; done
  tar cf - -C "$root" . | xz -T2 -6 >"$out"
  ls -la "$out"
  ;;
run)
  bundle=${2:?usage: gpu-bundle.sh run BUNDLE.tar.xz [COMMAND...]}
  shift 2
  dir=/opt/strata-bundle
  mkdir -p "$dir"
  tar xJf "$bundle" -C "$dir"
  for l in "$dir"/lib/*; do
    n=$(basename "$l")
    if [ -e "/usr/lib/x86_64-linux-gnu/$n" ] || [ -e "/lib/x86_64-linux-gnu/$n" ]; then rm "$l"; fi
  done
  cublas=$(find / -xdev -name 'libcublasLt.so.1*' 2>/dev/null | head -1 || true)
  nccl=$(find / -xdev -name 'libnccl.so.2*' 2>/dev/null | head -1 || true)
  [ -n "$cublas" ] && [ -n "$nccl" ] || { echo "gpu-bundle: cuBLAS or NCCL not found on this machine" >&2; exit 1; }
  export LD_LIBRARY_PATH="$dir/lib:$(dirname "$cublas"):$(dirname "$nccl")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader
  b=$dir/build
  mkdir -p "$b/cli" "$b/tests" "$b/bench" "$b/simulator"
  ln -sf "$dir/bin/strata" "$b/cli/strata"
  ln -sf "$dir/bin/executor_test" "$b/tests/executor_test"
  ln -sf "$dir/bin/gpu_bench" "$b/bench/gpu_bench"
  ln -sf "$dir/bin/strata-sim-worker" "$b/simulator/strata-sim-worker"
  if ldd "$dir/bin/strata" | grep "not found"; then echo "gpu-bundle: libraries missing (above)" >&2; exit 1; fi
  if [ $# -eq 0 ]; then exec bash "$here/scripts/gpu-check.sh" "$b"; fi
  exec "$@"
  ;;
*)
  echo "usage: gpu-bundle.sh pack OUT.tar.xz [BUILD_DIR] | run BUNDLE.tar.xz [COMMAND...]" >&2
  exit 2
  ;;
esac
