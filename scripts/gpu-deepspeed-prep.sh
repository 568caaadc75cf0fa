#!/usr/bin/env bash
# Puts DeepSpeed v0.5.4 and v0.6.0 (PR #1453's before and after), unmodified,
# into .gpu/ds/<tag>/deepspeed for scripts/gpu-deepspeed-stage3.py, from a
# git clone of deepspeedai/DeepSpeed (MIRROR: its git directory or work
# tree). The op builders (a symbolic link in the repository) are copied in;
# the CUDA sources are left out (no op is built: the runs use
# torch.optim.Adam and no offload). About 4 MiB; `.gpu/` is git-ignored
# locally (.git/info/exclude) and travels to the GPU machine as a carried path.
set -euo pipefail
mirror=${1:?usage: gpu-deepspeed-prep.sh MIRROR}
root=$(git rev-parse --show-toplevel)
for tag in v0.5.4 v0.6.0; do
  dest="$root/.gpu/ds/$tag"
  rm -rf "$dest"; mkdir -p "$dest"
  git -C "$mirror" archive "$tag" deepspeed op_builder | tar -x -C "$dest"
  rm -f "$dest/deepspeed/ops/op_builder" "$dest/deepspeed/ops/csrc"
  mv "$dest/op_builder" "$dest/deepspeed/ops/op_builder"
  echo "$tag: $(git -C "$mirror" rev-parse "$tag^{commit}")" >"$dest/COMMIT"
done
du -sh "$root/.gpu/ds"
