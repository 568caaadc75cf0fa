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
# three ways (layer() below): every op eager with unfused attention;
# Megatron's fused kernels (scale-mask-softmax, bias-GeLU,
# bias-dropout-add, as the simulator's model assumes) with unfused
# attention; the same with attention in one flash kernel. bf16.
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


# Megatron-LM's fused kernels, as torch.compile fuses them (each one
# kernel forward, one backward): FusedScaleMaskSoftmax (the scale is in the
# scores' GEMM, baddbmm's alpha), bias_gelu_impl and
# bias_dropout_add_fused_train.
@torch.compile(fullgraph=True)
def masked_softmax(scores):
    return torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)


@torch.compile(fullgraph=True)
def bias_gelu(y, bias):
    return F.gelu(y + bias, approximate="tanh")


@torch.compile(fullgraph=True)
def bias_dropout_add(y, bias, residual):
    return residual + F.dropout(y + bias, p)


def layer(x, attention):
    # attention: "eager" (every op its own kernel, unfused attention),
    # "megatron" (Megatron's fused kernels, unfused attention) or "flash"
    # (Megatron's fused kernels, attention in one flash kernel).
    fused = attention != "eager"
    y = F.layer_norm(x, (h,), W["ln1_w"], W["ln1_b"])
    q, k, v = F.linear(y, W["qkv_w"], W["qkv_b"]).view(s, b, 3, a, h // a).permute(2, 1, 3, 0, 4)  # [b, a, s, d] each
    if attention == "flash":
        c = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True)
    elif attention == "megatron":
        q3, k3 = q.reshape(b * a, s, h // a), k.reshape(b * a, s, h // a)
        scores = torch.baddbmm(torch.empty(b * a, s, s, device=dev, dtype=dt), q3, k3.transpose(1, 2), beta=0.0,
                               alpha=1.0 / math.sqrt(h // a))
        c = torch.matmul(F.dropout(masked_softmax(scores.view(b, a, s, s)), p), v)
    else:
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(h // a)
        probs = F.dropout(torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1), p)
        c = torch.matmul(probs, v)
    c = c.permute(2, 0, 1, 3).reshape(s, b, h)
    if fused:
        x = bias_dropout_add(F.linear(c, W["proj_w"]), W["proj_b"], x)
        y = F.layer_norm(x, (h,), W["ln2_w"], W["ln2_b"])
        return bias_dropout_add(F.linear(bias_gelu(F.linear(y, W["fc1_w"]), W["fc1_b"]), W["fc2_w"]), W["fc2_b"], x)
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
    name = {"eager": "eager, unfused attn", "megatron": "Megatron's, unfused attn", "flash": "Megatron's, flash attn"}[attention]
    print(f"{name:24s} forward {statistics.median(fwd):.3f} ms (min {min(fwd):.3f})  "
          f"backward {statistics.median(bwd):.3f} ms (min {min(bwd):.3f})")
