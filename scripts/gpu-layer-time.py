# One GPT layer as Megatron-LM writes it (pre-LayerNorm; QKV, scores,
# scale-mask-softmax, dropout, context, projection, bias-dropout-add;
# LayerNorm, fc1, GeLU, fc2, bias-dropout-add), timed forward and backward
# on the GPU at hand in eager PyTorch, to set beside the simulator's compute
# model for the same shapes (docs/simulator.md "Compute model": `strata
# simulate --csv` gives each op's time).
#
# Usage: python3 scripts/gpu-layer-time.py [HIDDEN HEADS SEQ BATCH [profile|ops]]
#        (default 4096 32 1024 5: the ZeRO-Infinity 10B row's layer)
# Prints the median over 20 timed runs after 5 warm-ups, in ms, of the
# forward and of the backward (its input gradient and every weight's), with
# four ways (layer() below): every op eager with unfused attention;
# Megatron's fused kernels (scale-mask-softmax, bias-GeLU,
# bias-dropout-add, as the simulator's model assumes) with unfused
# attention; the same with attention in one flash kernel (these three in
# bf16); and Megatron-LM v1.1.5 as the ZeRO-Infinity artifact runs it
# (layer_v115(): fp16, no fusion flag given, so every op eager, softmax in
# fp16). With "profile", each variant's GPU kernels are listed too (their
# time per forward and per backward, torch.profiler, 5 runs), to set beside
# the model's ops one by one; with "ops", v1.1.5's backward and forward
# by PyTorch operator and input shapes (which operator launched which
# copies), and the GPU's copy bandwidth (clone of 1 GiB) for scale.
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


# Megatron-LM v1.1.5 as the SC'21 artifact runs it (DeepSpeedExamples
# branch sc21i, Megatron-LM-v1.1.5-ZeRO3/megatron/model/transformer.py;
# its scripts pass none of --scaled-upper-triang-masked-softmax-fusion,
# --bias-gelu-fusion, --bias-dropout-fusion, --attention-softmax-in-fp32,
# --apply-query-key-layer-scaling): ParallelSelfAttention.forward's
# baddbmm (scale as alpha), the mask func's in-place masked_fill_ (-10000),
# softmax in fp16, dropout, bmm, the context's permute().contiguous();
# the row-parallel dense and dense_4h_to_h return their bias (skip_bias_add)
# for get_bias_dropout_add's eager add, dropout, add; the MLP's eager
# bias add and erf GeLU. Weights and activations in fp16.
W16 = {k: w.detach().half().requires_grad_() for k, w in W.items()}
ltor = mask.view(1, 1, s, s)


def layer_v115(x):
    w = W16
    hn = h // a
    y = F.layer_norm(x, (h,), w["ln1_w"], w["ln1_b"])
    mixed = F.linear(y, w["qkv_w"], w["qkv_b"]).view(s, b, a, 3 * hn)
    q, k, v = (t.view(s, b * a, hn) for t in torch.split(mixed, hn, dim=-1))  # split_tensor_along_last_dim
    scores = torch.baddbmm(torch.empty(b * a, s, s, device=dev, dtype=torch.float16), q.transpose(0, 1),
                           k.transpose(0, 1).transpose(1, 2), beta=0.0, alpha=1.0 / math.sqrt(hn))
    scores = scores.view(b, a, s, s)
    scores.masked_fill_(ltor, -10000.0)
    probs = F.dropout(torch.softmax(scores, dim=-1), p)
    c = torch.bmm(probs.view(b * a, s, s), v.transpose(0, 1))
    c = c.view(b, a, s, hn).permute(2, 0, 1, 3).contiguous().view(s, b, h)
    x = x + F.dropout(F.linear(c, w["proj_w"]) + w["proj_b"].expand_as(x), p)
    y = F.layer_norm(x, (h,), w["ln2_w"], w["ln2_b"])
    y = F.gelu(F.linear(y, w["fc1_w"]) + w["fc1_b"])
    return x + F.dropout(F.linear(y, w["fc2_w"]) + w["fc2_b"].expand_as(x), p)


def profiled(phase, fwd, bwd_of, **options):
    # One forward, or the backward of one forward run first, under
    # torch.profiler(**options); one forward's activations held at a time
    # (the 1T layer's take a tenth of an H100).
    from torch.profiler import profile as torch_profile
    out = fwd() if phase == "backward" else None
    torch.cuda.synchronize()
    with torch_profile(**options) as prof:
        if phase == "forward":
            fwd()
        else:
            bwd_of(out)
        torch.cuda.synchronize()
    return prof


def profile(name, fwd, bwd_of, n=5):
    # GPU kernel time per call of fwd() and of its backward, by kernel name.
    from torch.profiler import ProfilerActivity
    for phase in ("forward", "backward"):
        rows = {}
        for _ in range(n):
            prof = profiled(phase, fwd, bwd_of, activities=[ProfilerActivity.CUDA])
            for e in prof.key_averages():
                t = getattr(e, "self_device_time_total", None)
                if t is None:
                    t = e.self_cuda_time_total
                if t > 0:
                    tot, count = rows.get(e.key, (0.0, 0))
                    rows[e.key] = (tot + t / n, count + e.count)
        top = sorted(((t, c // n, k) for k, (t, c) in rows.items()), reverse=True)
        print(f"  {name} {phase}: {sum(r[0] for r in top) / 1e3:.3f} ms of kernels per call")
        for t, count, key in top[:25]:
            print(f"    {t:9.1f} us  x{count:<3d} {key[:110]}", flush=True)


def ops(fwd):
    # v1.1.5's kernels by the operator that launched them and its shapes.
    from torch.profiler import ProfilerActivity
    for phase in ("forward", "backward"):
        prof = profiled(phase, fwd, lambda out: out.backward(torch.randn_like(out)),
                        activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True)
        print(f"  v1.1.5 {phase}, by operator (one call):", flush=True)
        avg = prof.key_averages(group_by_input_shape=True)
        for key in ("self_device_time_total", "self_cuda_time_total"):
            try:
                print(avg.table(sort_by=key, row_limit=40, max_name_column_width=60, max_shapes_column_width=70), flush=True)
                break
            except Exception as err:
                print(f"  (sort by {key}: {err!r})")
    big = torch.empty(1 << 29, device=dev, dtype=torch.float16)
    for _ in range(3):
        big.clone()
    _, t = timed(lambda: [big.clone() for _ in range(10)])
    print(f"  clone of 1 GiB: {2 * 10 * big.numel() * 2 / (t / 1e3) / 1e9:.0f} GB/s read + written", flush=True)


def clear_grads():
    for w in list(W.values()) + list(W16.values()):
        w.grad = None


def timed(fn):
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    out = fn()
    e1.record()
    torch.cuda.synchronize()
    return out, e0.elapsed_time(e1)


print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}; layer h={h} heads={a} seq={s} batch={b}, bf16 (v1.1.5: fp16)")
profiling = len(sys.argv) > 5 and sys.argv[5] == "profile"
if len(sys.argv) > 5 and sys.argv[5] == "ops":
    x = torch.randn(s, b, h, device=dev, dtype=torch.float16, requires_grad=True)
    for _ in range(3):
        layer_v115(x).backward(torch.randn(s, b, h, device=dev, dtype=torch.float16))
    ops(lambda: layer_v115(x))
    sys.exit(0)
for attention in ("eager", "megatron", "flash", "v115"):
    fwd, bwd = [], []
    xdt = torch.float16 if attention == "v115" else dt
    run = layer_v115 if attention == "v115" else (lambda x, at=attention: layer(x, at))
    for it in range(25):
        x = torch.randn(s, b, h, device=dev, dtype=xdt, requires_grad=True)
        g = torch.randn(s, b, h, device=dev, dtype=xdt)
        clear_grads()
        out, tf = timed(lambda: run(x))
        _, tb = timed(lambda: out.backward(g))
        if it >= 5:
            fwd.append(tf)
            bwd.append(tb)
    name = {"eager": "eager, unfused attn", "megatron": "Megatron's, unfused attn", "flash": "Megatron's, flash attn",
            "v115": "Megatron v1.1.5 fp16"}[attention]
    print(f"{name:24s} forward {statistics.median(fwd):.3f} ms (min {min(fwd):.3f})  "
          f"backward {statistics.median(bwd):.3f} ms (min {min(bwd):.3f})", flush=True)
    del out, x, g
    clear_grads()
    if profiling and attention in ("megatron", "v115"):
        x = torch.randn(s, b, h, device=dev, dtype=xdt, requires_grad=True)
        try:
            profile(f"kernels of {attention}", lambda: run(x), lambda out: out.backward(torch.ones_like(out)))
        except Exception as err:  # a figure lost, not the run
            print(f"  profile failed: {err!r}", flush=True)
