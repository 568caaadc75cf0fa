# DeepSpeed's own ZeRO-3 of before and after PR #1453 (v0.5.4 and v0.6.0),
# run for real on the GPU at hand, against the same GPT model in plain
# PyTorch: the measurement papers/zero-infinity/README.md ("Prepared, not yet
# run: DeepSpeed's stage 3 of before and after, on one H200") describes.
# Strata simulates the same runs with papers/zero-infinity/h200-stage3.yaml.
# Not yet run on a GPU: expect a first run to need a shim more.
#
#   bash scripts/gpu-deepspeed-prep.sh MIRROR   # here: the two releases into .gpu/ds
#   python3 scripts/gpu-deepspeed-stage3.py .gpu/ds OUTDIR   # there, on the GPU
#
# Each (model, variant) runs in its own process (two DeepSpeed releases cannot
# share one): 3 warm-up iterations, 8 timed (wall clock around a
# torch.cuda.synchronize() each side), then one under torch.profiler (CUDA
# activity only) whose kernels, copies and fills give the GPU's busy time.
# One JSON line per run goes to OUTDIR/results.jsonl and stdout, with the
# Python garbage collections during the timed steps (count, seconds, the
# longest, per generation, share of the timed time): a measured host-stall
# share for the stall diagnosis of Fig. 5a.
#
# The releases are the repository's tags, unmodified; what this file adds
# before importing one is the PyTorch API those releases used and PyTorch 2
# renamed or removed (torch._six, memory_cached, _get_global_rank, ...), and
# stand-ins for modules no stage-3 path uses (tensorboardX, hjson). Model:
# GPT-2's layer (LayerNorm, fused QKV, causal flash attention through
# scaled_dot_product_attention, GeLU MLP, dropout 0.1), untied LM head, fp16,
# torch.utils.checkpoint per layer (reentrant, as Hugging Face's in 2021),
# torch.optim.Adam as DeepSpeed's client optimizer, DeepSpeed's default
# stage-3 settings, static loss scale 128.
import json
import os
import subprocess
import sys
import time
import types

MODELS = {  # name: (hidden, layers, heads, micro batch, sequence)
    "h2048-l24": (2048, 24, 16, 8, 1024),
    "h4096-l8": (4096, 8, 32, 8, 1024),
}
VARIANTS = ["plain", "v0.5.4", "v0.6.0"]
VOCAB = 50304
WARMUP, STEPS = 3, 8


def shim_torch(torch):
    import collections
    import collections.abc
    import math
    import numpy
    import setuptools  # noqa: F401  (distutils for the op builders' imports, Python 3.12)
    # Python 3.10 removed these aliases (runtime/config_utils.py prints the
    # config through them); numpy 2 removed BUFSIZE (v0.6.0's
    # autotuning/scheduler.py imports it, unused).
    for name in ("Mapping", "Sequence", "MutableMapping"):
        if not hasattr(collections, name):
            setattr(collections, name, getattr(collections.abc, name))
    if not hasattr(numpy, "BUFSIZE"):
        numpy.BUFSIZE = 8192
    six = types.ModuleType("torch._six")
    six.inf, six.nan = math.inf, math.nan
    six.string_classes, six.int_classes, six.container_abcs = (str, bytes), int, collections.abc
    sys.modules["torch._six"] = six
    torch._six = six
    cuda = torch.cuda
    for old, new in [("memory_cached", "memory_reserved"), ("max_memory_cached", "max_memory_reserved"),
                     ("reset_max_memory_cached", "reset_peak_memory_stats")]:
        if not hasattr(cuda, old):
            setattr(cuda, old, getattr(cuda, new))
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d
    if not hasattr(c10d, "_get_global_rank"):
        c10d._get_global_rank = c10d.get_global_rank
    if not hasattr(dist, "_all_gather_base"):
        dist._all_gather_base = lambda out, inp, group=None, async_op=False: dist.all_gather_into_tensor(
            out, inp, group=group, async_op=async_op)
    if not hasattr(dist, "_reduce_scatter_base"):
        dist._reduce_scatter_base = lambda out, inp, op=dist.ReduceOp.SUM, group=None, async_op=False: \
            dist.reduce_scatter_tensor(out, inp, op=op, group=group, async_op=async_op)
    # v0.6.0 imports them from distributed_c10d, and falls back to the list
    # all_gather (a path it never ran on its own PyTorch) without them.
    for name in ("_all_gather_base", "_reduce_scatter_base"):
        if not hasattr(c10d, name):
            setattr(c10d, name, getattr(dist, name))
    import torch.optim.lr_scheduler as lrs
    if not hasattr(lrs, "_LRScheduler"):
        lrs._LRScheduler = lrs.LRScheduler
    tbx = types.ModuleType("tensorboardX")
    tbx.SummaryWriter = type("SummaryWriter", (), {"__init__": lambda self, *a, **k: None})
    sys.modules.setdefault("tensorboardX", tbx)
    sys.modules.setdefault("hjson", json)


def build_model(torch, hidden, layers, heads, seq):
    nn, F = torch.nn, torch.nn.functional
    from torch.utils.checkpoint import checkpoint

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
            self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
            self.fc1, self.fc2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
            self.drop = nn.Dropout(0.1)

        def forward(self, x):
            b, t, h = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, heads, h // heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.drop(self.proj(a.transpose(1, 2).reshape(b, t, h)))
            return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(VOCAB, hidden), nn.Embedding(seq, hidden)
            self.layers = nn.ModuleList(Layer() for _ in range(layers))
            self.ln_f, self.head = nn.LayerNorm(hidden), nn.Linear(hidden, VOCAB, bias=False)
            self.drop = nn.Dropout(0.1)

        def forward(self, idx, target):
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.drop(self.wte(idx) + self.wpe(pos))
            for layer in self.layers:
                x = checkpoint(layer, x, use_reentrant=True)
            logits = self.head(self.ln_f(x))
            return F.cross_entropy(logits.float().view(-1, VOCAB), target.view(-1))

    return Gpt()


def gpu_busy(trace_path):
    """Seconds of the union of kernels, copies and fills in a torch.profiler
    chrome trace, their count, and the ten kernel names with most time."""
    with open(trace_path) as f:
        events = json.load(f)["traceEvents"]
    spans, by_name = [], {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            spans.append((e["ts"], e["ts"] + e["dur"]))
            key = e["name"][:60]
            by_name[key] = by_name.get(key, 0.0) + e["dur"]
    spans.sort()
    busy, end = 0.0, None
    for s, t in spans:
        if end is None or s > end:
            busy += t - s
            end = t
        elif t > end:
            busy += t - end
            end = t
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:10]
    return busy / 1e6, len(spans), [(k, round(v / 1e3, 2)) for k, v in top]


def child(ds_root, outdir, model_name, variant):
    import torch
    hidden, layers, heads, batch, seq = MODELS[model_name]
    torch.cuda.set_device(0)
    torch.manual_seed(0)
    idx = torch.randint(VOCAB, (batch, seq), device="cuda")
    target = torch.roll(idx, -1, dims=1)
    if variant == "plain":  # the compute alone: forward, recomputation and backward in fp16
        model = build_model(torch, hidden, layers, heads, seq).cuda().half()
        def step():
            loss = model(idx, target)
            loss.backward()
            return loss
        engine = None
    else:
        shim_torch(torch)
        os.environ.update(RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                          MASTER_PORT=str(29500 + VARIANTS.index(variant)))
        torch.distributed.init_process_group("nccl")
        sys.path.insert(0, os.path.join(ds_root, variant))
        import deepspeed
        assert deepspeed.__file__.startswith(os.path.join(ds_root, variant)), deepspeed.__file__
        # Stage 3 and the engine load the `utils` op (csrc/utils/
        # flatten_unflatten.cpp), which only wraps PyTorch's own flatten and
        # unflatten: those, instead of a JIT build of the C++.
        from deepspeed.ops.op_builder import UtilsBuilder
        from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors
        UtilsBuilder.load = lambda self, verbose=True: types.SimpleNamespace(
            flatten=_flatten_dense_tensors, unflatten=_unflatten_dense_tensors)
        with torch.device("cuda"):
            model = build_model(torch, hidden, layers, heads, seq)
        opt = torch.optim.Adam(model.parameters(), lr=1e-5)
        cfg = {"train_micro_batch_size_per_gpu": batch, "gradient_accumulation_steps": 1,
               "fp16": {"enabled": True, "loss_scale": 128}, "zero_allow_untested_optimizer": True,
               "zero_optimization": {"stage": 3}, "steps_per_print": 1 << 30, "wall_clock_breakdown": False}
        engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=cfg)
        def step():
            loss = engine(idx, target)
            engine.backward(loss)
            engine.step()
            return loss
    params = sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel() for p in model.parameters())
    # Python's garbage collections during the timed steps, each one's
    # generation and seconds (gc.callbacks): a host stall that a barrier at
    # every fetch passes on to the GPU, and over a collective to every rank
    # (papers/zero-infinity/README.md, "Fig. 5a and stalls").
    import gc
    pauses, gc_on, gc_start = [], [False], [0.0]
    def on_gc(phase, info):
        if not gc_on[0]:
            return
        if phase == "start":
            gc_start[0] = time.perf_counter()
        else:
            pauses.append((info["generation"], time.perf_counter() - gc_start[0]))
    gc.callbacks.append(on_gc)
    times, losses = [], []
    for i in range(WARMUP + STEPS):
        torch.cuda.synchronize()
        gc_on[0] = i >= WARMUP
        t0 = time.perf_counter()
        loss = step()
        torch.cuda.synchronize()
        if i >= WARMUP:
            times.append(time.perf_counter() - t0)
        losses.append(float(loss))
    gc_on[0] = False
    gc_stats = {"count": len(pauses), "seconds": sum(d for _, d in pauses),
                "max_s": max((d for _, d in pauses), default=0.0),
                "by_generation": {g: [sum(1 for x, _ in pauses if x == g), sum(d for x, d in pauses if x == g)]
                                  for g in (0, 1, 2)}}
    gc_stats["share_of_timed"] = gc_stats["seconds"] / sum(times)
    from torch.profiler import ProfilerActivity, profile
    trace = os.path.join(outdir, f"trace-{model_name}-{variant}.json")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        profiled = time.perf_counter() - t0
    prof.export_chrome_trace(trace)
    busy, count, top = gpu_busy(trace)
    os.remove(trace)
    times.sort()
    row = {"model": model_name, "variant": variant, "hidden": hidden, "layers": layers, "heads": heads,
           "batch": batch, "seq": seq, "params": params, "median_s": times[len(times) // 2],
           "min_s": times[0], "max_s": times[-1], "profiled_s": profiled, "gpu_busy_s": busy,
           "gpu_ops": count, "top_kernels_ms": top, "losses": losses, "gc": gc_stats,
           "skipped_steps": getattr(engine, "skipped_steps", None),
           "max_allocated_gib": torch.cuda.max_memory_allocated() / 2**30,
           "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
    print(json.dumps(row), flush=True)
    with open(os.path.join(outdir, "results.jsonl"), "a") as f:
        f.write(json.dumps(row) + "\n")
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def main():
    if len(sys.argv) == 5 + 1 and sys.argv[1] == "--child":
        return child(*sys.argv[2:])
    if len(sys.argv) != 3:
        sys.exit("usage: gpu-deepspeed-stage3.py DS_ROOT OUTDIR")
    ds_root, outdir = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    os.makedirs(outdir, exist_ok=True)
    failures = 0
    for model_name in MODELS:
        for variant in VARIANTS:
            t0 = time.time()
            try:
                r = subprocess.run([sys.executable, __file__, "--child", ds_root, outdir, model_name, variant],
                                   capture_output=True, text=True, timeout=150)
            except subprocess.TimeoutExpired as e:
                text = [x.decode(errors="replace") if isinstance(x, bytes) else (x or "") for x in (e.stdout, e.stderr)]
                r = subprocess.CompletedProcess(e.cmd, 124, text[0], text[1] + "\ntimed out")
            with open(os.path.join(outdir, f"log-{model_name}-{variant}.txt"), "w") as f:
                f.write(r.stdout + r.stderr)
            if r.returncode != 0:
                failures += 1
                print(f"FAILED {model_name} {variant} (rc {r.returncode}, {time.time() - t0:.0f} s):\n"
                      + "\n".join(r.stderr.splitlines()[-25:]), flush=True)
            else:
                print(f"ok {model_name} {variant} in {time.time() - t0:.0f} s", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
