# One GPT layer as Megatron-LM writes it (pre-LayerNorm; QKV, scores,
# scale-mask-softmax, dropout, context, projection, bias-dropout-add;
# LayerNorm, fc1, GeLU, fc2, bias-dropout-add), timed forward and backward
# on the GPU at hand in eager PyTorch, to set beside the simulator's compute
# model for the same shapes (docs/simulator.md "Compute model": `strata
# simulate --csv` gives each op's time).
#
# Usage: python3 scripts/gpu-layer-time.py [HIDDEN HEADS SEQ BATCH]
#        (default 4096 32 1024 5: the ZeRO-Infinity 10B row's layer)
# Prints the median over 20 timed runs after 5 warm-ups, in ms, of the
# forward and of the backward (its input gradient and every weight's), with
# the attention unfused (the scores in memory, as Megatron in 2021: eager
# PyTorch's separate scale, mask and softmax kernels, or Megatron's kernels,
# the scale in the GEMM and one fused masked softmax) and fused (torch's
# scaled_dot_product_attention, a flash kernel on Hopper), in bf16.
import math
import statistics
import sys

import torch
import torch.nn.functional as F

h, a, s, b = (int(x) for x in sys.argv[1:5]) if len(sys.argv) > 4 else (4096, 32, 1024, 5)
dev, dt, p = "cuda", torch.bfloat16, 0.1
torch.manual_seed(0)


def param(*shape):
    return (torch.randn(*shape, device=dev, dtype=dt) * 0.02).requires_grad_()


W = dict(ln1_w=param(h), ln1_b=param(h), qkv_w=param(3 * h, h), qkv_b=param(3 * h), proj_w=param(h, h),
         proj_b=param(h), ln2_w=param(h), ln2_b=param(h), fc1_w=param(4 * h, h), fc1_b=param(4 * h),
         fc2_w=param(h, 4 * h), fc2_b=param(h))
mask = torch.ones(s, s, device=dev, dtype=torch.bool).triu(1)


@torch.compile(fullgraph=True)
def masked_softmax(scores):
    # Megatron's FusedScaleMaskSoftmax: one kernel reads the scores and
    # writes the probabilities (and one backward); torch.compile fuses it.
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)


def layer(x, attention):
    y = F.layer_norm(x, (h,), W["ln1_w"], W["ln1_b"])
    q, k, v = F.linear(y, W["qkv_w"], W["qkv_b"]).view(s, b, 3, a, h // a).permute(2, 1, 3, 0, 4)  # [b, a, s, d] each
    if attention == "flash":
        c = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
    elif attention == "megatron":
        # Megatron-LM's core attention: the scale in the GEMM (baddbmm's
        # alpha), the fused masked softmax, dropout, the context GEMM.
        scores = torch.matmul(q * (1.0 / math.sqrt(h // a)), k.transpose(-1, -2))
        c = torch.matmul(F.dropout(masked_softmax(scores), p), v)
    else:
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(h // a)
        probs = F.dropout(torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1), p)
        c = torch.matmul(probs, v)
    c = c.permute(2, 0, 1, 3).reshape(s, b, h)
    x = x + F.dropout(F.linear(c, W["proj_w"], W["proj_b"]), p)
    y = F.layer_norm(x, (h,), W["ln2_w"], W["ln2_b"])
    return x + F.dropout(F.linear(F.gelu(F.linear(y, W["fc1_w"], W["fc1_b"])), W["fc2_w"], W["fc2_b"]), p)


def timed(fn):
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    out = fn()
    e1.record()
    torch.cuda.synchronize()
    return out, e0.elapsed_time(e1)


print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}; layer h={h} heads={a} seq={s} batch={b}, bf16")
for attention in ("eager", "megatron", "flash"):
    fwd, bwd = [], []
    for it in range(25):
        x = torch.randn(s, b, h, device=dev, dtype=dt, requires_grad=True)
        g = torch.randn(s, b, h, device=dev, dtype=dt)
        for w in W.values():
            w.grad = None
        out, tf = timed(lambda: layer(x, attention))
        _, tb = timed(lambda: out.backward(g))
        if it >= 5:
            fwd.append(tf)
            bwd.append(tb)
    name = {"eager": "unfused, eager kernels", "megatron": "unfused, Megatron's", "flash": "flash attention"}[attention]
    print(f"{name:24s} forward {statistics.median(fwd):.3f} ms (min {min(fwd):.3f})  "
          f"backward {statistics.median(bwd):.3f} ms (min {min(bwd):.3f})")
