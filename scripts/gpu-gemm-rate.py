# Dense bf16 GEMM rates through PyTorch (cuBLAS) on the GPU at hand: the GPU
# presets' `efficiency` (docs/simulator.md "Presets"). TFLOP/s per shape, the
# median of 20 after 5 warm-ups, and its fraction of PEAK (default 989e12,
# the H100 SXM's dense bf16). Usage: python3 scripts/gpu-gemm-rate.py [PEAK]
import statistics
import sys

import torch

peak = float(sys.argv[1]) if len(sys.argv) > 1 else 989e12
torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
for (m, n, k) in [(8192, 8192, 8192), (16384, 16384, 8192), (4096, 4096, 4096), (5120, 25600, 25600), (5120, 102400, 25600)]:
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16); b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(5): a @ b
    ts = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); a @ b; e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e) / 1e3)
    t = statistics.median(ts)
    print(f"bf16 {m}x{n}x{k}: median {2*m*n*k/t/1e12:.0f} TFLOP/s (min time {min(ts)*1e3:.2f} ms, max {max(ts)*1e3:.2f} ms) = {2*m*n*k/t/peak:.3f} of the peak")
    del a, b
