// strata run's engine: offload must not change numerics. For every stage and
// placement DeepSpeed accepts, the weights digest after a few steps equals
// that of the same training with everything in device memory.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <tuple>

#include "io/codec.h"
#include "strata/executor/runner.h"
#include "strata/plan/write_requests.h"
#include "strata/planner/planner.h"
#include "test_paths.h"
#include "test_util.h"

namespace strata::exec {
namespace {

// `dir`: the swap directory under the build's tmp/; a test on real files
// that ctest may run beside another takes a directory of its own (a run
// locks its directory). "": the plan's own directories.
Result<RunResult> Train(const Scenario& s, Env* env, IoEngineKind engine = IoEngineKind::kSync, int steps = 3,
                        std::function<Status(int, const RunResult&)> after_step = nullptr,
                        const std::string& dir = "run_test_nvme") {
  STRATA_ASSIGN_OR_RETURN(auto plan, BuildPlan(s));
  RunOptions o;
  o.steps = steps;
  o.env = env;
  o.engine = engine;
  if (!dir.empty()) o.nvme_dir = std::string(testing::BinaryDir()) + "/tmp/" + dir;
  o.after_step = std::move(after_step);
  return RunTraining(plan, o);
}

Scenario Seed(int stage, OffloadDevice param, OffloadDevice optim) {
  Scenario s = testing::Builtin("seed");
  s.zero.stage = stage;
  s.zero.offload_param.device = param;
  s.zero.offload_optimizer.device = optim;
  s.zero.overlap_comm = stage == 3;
  return s;
}

// Parameters and optimizer state in pageable CPU memory (pin_memory false):
// copies go through the staging buffer in chunks (accumulating gradients
// too), with the same weights as pinned memory.
TEST(Run, PageableCopiesGiveTheSameWeights) {
  for (int gas : {1, 2}) {
    auto env = NewMemEnv();
    Scenario s = Seed(3, OffloadDevice::kCpu, OffloadDevice::kCpu);
    s.training.gradient_accumulation_steps = gas;
    s.zero.offload_param.pin_memory = s.zero.offload_optimizer.pin_memory = true;
    auto pinned = Train(s, env.get());
    ASSERT_TRUE(pinned.ok()) << pinned.status().message();
    s.zero.offload_param.pin_memory = s.zero.offload_optimizer.pin_memory = false;
    auto plan = BuildPlan(s);
    ASSERT_TRUE(plan.ok());
    int pageable = 0;
    for (const Op& op : plan->ops) pageable += IsPageableCopy(*plan, op);
    EXPECT_GT(pageable, 0);
    auto paged = Train(s, env.get());
    ASSERT_TRUE(paged.ok()) << paged.status().message();
    EXPECT_EQ(paged->weights_digest, pinned->weights_digest) << "gas " << gas;
    EXPECT_EQ(paged->losses, pinned->losses);
  }
}

// A step skipped for fp16 overflow does no Adam work: the median timeline
// (what validate measures) is of a step the optimizer applied, and the
// per-step flags add up to the count.
// DeepSpeed's pre-v0.6.0 gradient path (policy.deepspeed_stage3 v0.5)
// moves the same gradients by another route: the same weights.
TEST(Run, DirectGradientsGiveTheSameWeights) {
  auto env = NewMemEnv();
  // (The optimizer on the GPU under v0.5, whose gradient partition is
  // allocated each iteration, is checked on two ranks by mpi_test.sh: here
  // LeakSanitizer's tracer crashed at this binary's exit with it.)
  for (OffloadDevice optim : {OffloadDevice::kCpu, OffloadDevice::kNvme}) {
    Scenario s = Seed(3, OffloadDevice::kNvme, optim);
    auto ref = Train(s, env.get());
    ASSERT_TRUE(ref.ok()) << ref.status().message();
    s.policy.deepspeed_stage3 = DeepSpeedStage3::kV05;
    auto r = Train(s, env.get());
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->weights_digest, ref->weights_digest) << OffloadDeviceName(optim);
    EXPECT_EQ(r->losses, ref->losses);
  }
}

// Partial optimizer offload (offload_optimizer.ratio): the sub-groups that
// step on the GPU do the same Adam as on the CPU, so the weights are those
// of full offload, with one micro step and with two.
TEST(Run, PartialOptimizerOffloadGivesTheSameWeights) {
  auto env = NewMemEnv();
  for (int gas : {1, 2}) {
    Scenario s = Seed(3, OffloadDevice::kCpu, OffloadDevice::kCpu);
    s.training.gradient_accumulation_steps = gas;
    s.zero.sub_group_size = Elements(300'000);  // [fc0.weight], [the rest]
    auto full = Train(s, env.get());
    ASSERT_TRUE(full.ok()) << full.status().message();
    s.zero.offload_optimizer.ratio = 0.5;  // sub-group 0 on the GPU
    auto partial = Train(s, env.get());
    ASSERT_TRUE(partial.ok()) << partial.status().message();
    EXPECT_EQ(partial->weights_digest, full->weights_digest) << "gas " << gas;
    EXPECT_EQ(partial->losses, full->losses);
  }
}

// ZeRO++'s quantized collectives are planned and simulated; the executor
// refuses them with the reason, before it starts (hpZ it runs: mpi_test).
TEST(Run, ZeroPlusPlusIsRefusedWithTheReason) {
  Scenario s = testing::SmallGpt(3, 2);
  s.zero.zero_quantized_weights = true;
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  auto r = RunTraining(*plan, RunOptions{});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ExitCode(), 2);
  EXPECT_NE(r.status().message().find("block quantizer"), std::string::npos) << r.status().message();
}

// The CPU Adam's pinned double buffer of the paper's DeepSpeed (v0.3: 8 GiB
// per rank, 1 GiB under v0.5; plan.h Buffer::backed false) counts in the
// run's CPU peak as in the plan's, and is never allocated: the process's
// resident memory after each step, while the resident buffers live, stays
// far below 8 GiB (the host backend fills what it allocates).
TEST(Run, CountedBuffersAreNotAllocated) {
  auto env = NewMemEnv();
  Scenario s = Seed(3, OffloadDevice::kCpu, OffloadDevice::kCpu);
  s.hardware.cpu.memory = Bytes(int64_t{64} << 30);
  s.policy.deepspeed_stage3 = DeepSpeedStage3::kV05;
  auto v05 = Train(s, env.get());
  ASSERT_TRUE(v05.ok()) << v05.status().message();
  s.policy.deepspeed_stage3 = DeepSpeedStage3::kV03;
  int64_t most = 0;  // resident bytes after a step
  auto v03 = Train(s, env.get(), IoEngineKind::kSync, 3, [&](int, const RunResult&) {
    long pages = 0, resident = 0;
    if (std::FILE* f = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
      std::fclose(f);
    }
    most = std::max<int64_t>(most, int64_t{resident} * sysconf(_SC_PAGESIZE));
    return Status::Ok();
  });
  ASSERT_TRUE(v03.ok()) << v03.status().message();
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok());
  const int cpu = static_cast<int>(Tier::kCpu);
  EXPECT_EQ(v03->peak[cpu].v - v05->peak[cpu].v, (int64_t{7} << 30) * plan->NodeScale(Tier::kCpu));
  EXPECT_EQ(v03->weights_digest, v05->weights_digest);
  EXPECT_GT(most, 0);
  EXPECT_LT(most, int64_t{6} << 30);
}

// The stream workers are the same threads every step: the kernel thread
// ids that read the clock (each op's span, on its stream's worker) are the
// same set in every step. (std::thread::id would not do: glibc reuses a
// joined thread's descriptor, so threads started per step can repeat it.)
class ThreadIdEnv : public FaultInjectionEnv {
 public:
  using FaultInjectionEnv::FaultInjectionEnv;
  double NowSeconds() override {
    {
      std::lock_guard<std::mutex> l(mu);
      tids[step].insert(static_cast<long>(syscall(SYS_gettid)));
    }
    return FaultInjectionEnv::NowSeconds();
  }
  std::mutex mu;
  int step = 0;
  std::map<int, std::set<long>> tids;  // step -> threads that read the clock
};

TEST(Run, StreamWorkersAreTheSameThreadsEveryStep) {
  auto mem = NewMemEnv();
  ThreadIdEnv env(mem.get());
  // Compute, copies, CPU Adam, collectives.
  auto r = Train(Seed(3, OffloadDevice::kCpu, OffloadDevice::kCpu), &env, IoEngineKind::kSync, 4,
                 [&](int step, const RunResult&) {
                   std::lock_guard<std::mutex> l(env.mu);
                   env.step = step + 1;
                   return Status::Ok();
                 });
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_GE(env.tids[1].size(), 3u);  // the caller and at least two streams' workers
  EXPECT_EQ(env.tids[2], env.tids[1]);
  EXPECT_EQ(env.tids[3], env.tids[1]);
}

// The stream workers are the same threads every step (executor/runtime/
// stream_threads.h): once warm, a threaded step of gpt-tiny in device
// memory makes no more page faults than the same step run sequentially on
// the calling thread. Threads started per step paid, every step, for their
// kernels' thread-local scratch and their stacks again: about 150 more
// faults a step here (665 in `strata run`, 1 ms of a 5.5 ms step: the gap
// papers/sim-vs-real found between a threaded run and calibrate's
// sequential one).
TEST(Run, ThreadedStepsDoNotFaultOnceWarm) {
  // The sanitizers' runtimes fault on their own (shadow memory, quarantine).
  if (std::getenv("STRATA_SANITIZED") != nullptr) GTEST_SKIP() << "page faults are not the program's under a sanitizer";
  Scenario s = testing::Builtin("gpt-tiny");
  s.zero.stage = 0;
  s.zero.offload_param.device = OffloadDevice::kNone;
  s.zero.offload_optimizer.device = OffloadDevice::kNone;
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok());
  long warm[2] = {};  // minor faults in steps 8-15: threaded, sequential
  // The process's first run still faults in its later steps (glibc's
  // allocator adapting its thresholds), whichever mode: a sequential run
  // first warms the process up and its count is overwritten.
  for (int parallel : {0, 1, 0}) {
    auto env = NewMemEnv();
    std::vector<long> faults;  // the process's minor faults after each step
    RunOptions o;
    o.steps = 16;
    o.env = env.get();
    o.engine = IoEngineKind::kSync;
    o.parallel = parallel != 0;
    o.after_step = [&](int, const RunResult&) {
      rusage u{};
      getrusage(RUSAGE_SELF, &u);
      faults.push_back(u.ru_minflt);
      return Status::Ok();
    };
    auto r = RunTraining(*plan, o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    ASSERT_EQ(faults.size(), 16u);
    warm[1 - parallel] = faults[15] - faults[7];
  }
  std::printf("minor page faults in 8 warm steps: threaded %ld, sequential %ld\n", warm[0], warm[1]);
  EXPECT_LT(warm[0] - warm[1], 8 * 50);
}

TEST(Run, MedianTimelineIsOfAnAppliedStep) {
  auto env = NewMemEnv();
  Scenario s = Seed(3, OffloadDevice::kCpu, OffloadDevice::kCpu);
  s.training.micro_batch_size = 1;
  s.training.gradient_accumulation_steps = 4;  // overflows twice at the initial scale
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok());
  RunOptions o;
  o.steps = 5;
  o.env = env.get();
  o.engine = IoEngineKind::kSync;
  o.median_timeline = true;
  auto r = RunTraining(*plan, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->step_skipped.size(), 5u);
  EXPECT_EQ(r->skipped_steps, std::count(r->step_skipped.begin(), r->step_skipped.end(), true));
  // A skipped step after the warm-up, so the median of steps 1-4 could be one.
  ASSERT_TRUE(std::find(r->step_skipped.begin() + 1, r->step_skipped.end(), true) != r->step_skipped.end());
  EXPECT_GT(r->timeline_step, 0);
  EXPECT_FALSE(r->step_skipped[r->timeline_step]);
  // Without the option, the timeline is the last step's.
  o.median_timeline = false;
  auto last = RunTraining(*plan, o);
  ASSERT_TRUE(last.ok());
  EXPECT_EQ(last->timeline_step, 4);
}

// Every ZeRO stage and offload placement the checks accept trains to the
// bits of stage 0 without offload. One instance per precision and
// accumulation count (a quarter of the work each: they spread over CTest's
// jobs and TSan's shards).
class RunOffload : public ::testing::TestWithParam<std::tuple<Precision, int>> {};

TEST_P(RunOffload, DoesNotChangeTheWeights) {
  const auto [prec, gas] = GetParam();
  auto env = NewMemEnv();
  Scenario base = Seed(0, OffloadDevice::kNone, OffloadDevice::kNone);
  base.training.precision = prec;
  base.training.gradient_accumulation_steps = gas;
  auto ref = Train(base, env.get());
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  int configs = 0;
  for (int stage = 0; stage <= 3; ++stage)
    for (OffloadDevice param : {OffloadDevice::kNone, OffloadDevice::kCpu, OffloadDevice::kNvme})
      for (OffloadDevice optim : {OffloadDevice::kNone, OffloadDevice::kCpu, OffloadDevice::kNvme}) {
        Scenario s = Seed(stage, param, optim);
        s.training.precision = prec;
        s.training.gradient_accumulation_steps = gas;
        if (!CheckScenario(s).empty()) continue;
        auto r = Train(s, env.get());
        ASSERT_TRUE(r.ok()) << r.status().message();
        EXPECT_EQ(r->weights_digest, ref->weights_digest)
            << "stage " << stage << " param " << OffloadDeviceName(param) << " optim " << OffloadDeviceName(optim);
        EXPECT_EQ(r->losses, ref->losses);
        ++configs;
      }
  EXPECT_EQ(configs, 14);
}

INSTANTIATE_TEST_SUITE_P(
    Run, RunOffload, ::testing::Combine(::testing::Values(Precision::kFp16, Precision::kBf16), ::testing::Values(1, 2)),
    [](const ::testing::TestParamInfo<std::tuple<Precision, int>>& i) {
      return std::string(PrecisionName(std::get<0>(i.param))) + "_gas" + std::to_string(std::get<1>(i.param));
    });

// The GPT workload (tied embeddings, persistent LayerNorms, checkpointed
// layers) on the bytes of a text: offload changes nothing, the loss falls.
TEST(Run, GptTrainsOnTextAndOffloadChangesNothing) {
  auto env = NewMemEnv();
  Scenario base = testing::Builtin("gpt-tiny");
  base.zero.stage = 0;
  base.zero.offload_param.device = OffloadDevice::kNone;
  base.zero.offload_optimizer.device = OffloadDevice::kNone;
  auto ref = Train(base, env.get(), IoEngineKind::kSync, 3);
  ASSERT_TRUE(ref.ok()) << ref.status().message();
  for (auto [stage, param, optim] : {std::tuple{1, OffloadDevice::kNone, OffloadDevice::kCpu},
                                     {2, OffloadDevice::kNone, OffloadDevice::kCpu},
                                     {3, OffloadDevice::kCpu, OffloadDevice::kCpu},
                                     {3, OffloadDevice::kNvme, OffloadDevice::kNvme}}) {
    Scenario s = testing::Builtin("gpt-tiny");
    s.zero.stage = stage;
    s.zero.offload_param.device = param;
    s.zero.offload_optimizer.device = optim;
    auto r = Train(s, env.get(), IoEngineKind::kSync, 3);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->weights_digest, ref->weights_digest) << "stage " << stage;
  }
  auto long_run = Train(testing::Builtin("gpt-tiny"), env.get(), IoEngineKind::kSync, 50);
  ASSERT_TRUE(long_run.ok());
  EXPECT_NEAR(long_run->losses.front(), std::log(256.0), 0.3);
  EXPECT_LT(long_run->losses.back(), long_run->losses.front() - 1.5);
}

// The GPT's Linear layers run on the MLP's kernels and pool: split among
// 1, 2 or 3 threads, the same bits.
TEST(Run, GptKernelsAmongThreadsGiveTheSameBits) {
  auto env = NewMemEnv();
  Scenario s = testing::Builtin("gpt-tiny");
  s.model.hidden_size = 128;  // Linear layers large enough to be split
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  RunOptions o;
  o.steps = 2;
  o.env = env.get();
  o.nvme_dir = "/mem/nvme";
  std::string first;
  for (int threads : {1, 2, 3}) {
    o.compute_threads = threads;
    auto r = RunTraining(*plan, o);
    ASSERT_TRUE(r.ok()) << r.status().message();
    if (first.empty()) first = r->weights_digest;
    EXPECT_EQ(r->weights_digest, first) << threads << " compute threads";
  }
}

// Activation checkpointing for real: the GPT drops each layer's working
// activations after its forward and the plan's recompute ops rebuild them in
// the backward; the training is bit for bit the one that keeps them.
TEST(Run, CheckpointedGptRecomputesExactly) {
  auto env = NewMemEnv();
  // Checkpoints on the GPU; in CPU memory through DeepSpeed's offload
  // engine (side streams, pinned); through its blocking path
  // (partition_activations: pageable, copies on the compute stream).
  for (int mode : {0, 1, 2}) {
    SCOPED_TRACE(mode);
    const bool cpu_ckpt = mode > 0;
    Scenario s = testing::Builtin("gpt-tiny");
    s.training.activation_checkpointing = true;
    s.training.cpu_checkpointing = cpu_ckpt;
    s.training.partition_activations = mode == 2;
    Scenario plain = s;
    plain.training.activation_checkpointing = false;
    plain.training.cpu_checkpointing = false;
    plain.training.partition_activations = false;
    auto a = Train(s, env.get(), IoEngineKind::kSync, 3);
    auto b = Train(plain, env.get(), IoEngineKind::kSync, 3);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().message() << b.status().message();
    EXPECT_EQ(a->weights_digest, b->weights_digest);
    EXPECT_EQ(a->losses, b->losses);
    // Parameters fetched again for the recompute (no reuse-distance keep),
    // from NVMe: the same training.
    Scenario fetched = s;
    fetched.zero.stage3_max_reuse_distance = Elements(0);
    fetched.zero.offload_param.device = OffloadDevice::kNvme;
    fetched.zero.offload_optimizer.device = OffloadDevice::kCpu;
    auto c = Train(fetched, env.get(), IoEngineKind::kSync, 3);
    ASSERT_TRUE(c.ok()) << c.status().message();
    EXPECT_EQ(c->weights_digest, b->weights_digest);
    int recomputes = 0;
    for (const auto& op : a->timeline.ops) recomputes += op.name().find(".recompute.") != std::string::npos;
    EXPECT_EQ(recomputes, 7 * s.model.layers);  // ln1 qkv attn attn_out ln2 fc1 fc2 per layer
    // Megatron v1.1.5-ZeRO3's split_transformers: two segments per layer,
    // each recomputed from its own checkpoint, with synchronized boundaries
    // (barriers on every GPU stream): the same training.
    Scenario halves = s;
    halves.training.split_transformers = true;
    halves.training.synchronize_checkpoint_boundary = true;
    auto d = Train(halves, env.get(), IoEngineKind::kSync, 3);
    ASSERT_TRUE(d.ok()) << d.status().message();
    EXPECT_EQ(d->weights_digest, b->weights_digest);
    EXPECT_EQ(d->losses, b->losses);
  }
}

// Write buffering (policy.write_buffer): the seed's NVMe writes go out as
// runs, fewer requests (the moments' two halves are one run; the requests
// spanning both are gathered in pinned memory), as many as the plan counts,
// through libaio (a run's last request, over a block, is not cut) and
// io_uring on real files, with the unbuffered weights and losses.
TEST(Run, WriteBufferingWritesFewerRequestsAndTheSameWeights) {
  Scenario s = Seed(3, OffloadDevice::kNvme, OffloadDevice::kNvme);
  auto plain = Train(s, NewMemEnv().get(), IoEngineKind::kSync, 2);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  s.policy.write_buffer = Bytes(1 << 20);
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok());
  int64_t planned = 0, unbuffered = 0;
  for (const Op& op : plan->ops)
    if (op.kind == OpKind::kNvmeWrite) {
      planned += CountWrites(op, 0, plan->run.aio.block_size.v, true).requests;
      unbuffered += CountWrites(op, 0, plan->run.aio.block_size.v, false).requests;
    }
  EXPECT_LT(planned, unbuffered);
  EXPECT_EQ(plain->nvme_write_requests, 2 * unbuffered);
  for (IoEngineKind engine : {IoEngineKind::kLibaio, IoEngineKind::kIoUring, IoEngineKind::kSync}) {
    auto buffered = Train(s, engine == IoEngineKind::kSync ? NewMemEnv().get() : PosixEnv(), engine, 2, nullptr,
                          "run_test_nvme_buffered");
    ASSERT_TRUE(buffered.ok()) << buffered.status().message();
    EXPECT_EQ(buffered->weights_digest, plain->weights_digest) << IoEngineName(engine);
    EXPECT_EQ(buffered->losses, plain->losses);
    EXPECT_EQ(buffered->nvme_write_requests, 2 * planned);
  }
}

// Compression (policy.compression): each codec this build has, on real
// files through libaio and io_uring and in memory, with and without write
// buffering: fewer bytes reach the files, and the weights and losses are
// the uncompressed run's bits.
TEST(Run, CompressionWritesFewerBytesAndTheSameWeights) {
  Scenario s = Seed(3, OffloadDevice::kNvme, OffloadDevice::kNvme);
  auto plain = Train(s, NewMemEnv().get(), IoEngineKind::kSync, 3);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->nvme_raw_written, 0u);
  int runs = 0;
  // Each codec on a real engine; write buffering with io_uring.
  for (auto [codec, engine] :
       {std::pair{CodecKind::kLz4, IoEngineKind::kLibaio}, std::pair{CodecKind::kZstd, IoEngineKind::kIoUring},
        std::pair{CodecKind::kZstd, IoEngineKind::kSync}}) {
    if (!CodecBuiltIn(codec)) continue;
    s.policy.compression.codec = codec;
    {
      s.policy.write_buffer = Bytes(engine == IoEngineKind::kIoUring ? 1 << 20 : 0);
      auto z = Train(s, engine == IoEngineKind::kSync ? NewMemEnv().get() : PosixEnv(), engine, 3, nullptr,
                     "run_test_nvme_compressed");
      ASSERT_TRUE(z.ok()) << z.status().message();
      EXPECT_EQ(z->weights_digest, plain->weights_digest) << IoEngineName(engine);
      EXPECT_EQ(z->losses, plain->losses);
      // Every byte the plan's NVMe writes move went through the codec, the
      // initial weights' writes not counted.
      auto plan = BuildPlan(s);
      ASSERT_TRUE(plan.ok());
      uint64_t planned = 0;
      for (const Op& op : plan->ops)
        if (op.kind == OpKind::kNvmeWrite) planned += static_cast<uint64_t>(op.bytes.v);
      EXPECT_EQ(z->nvme_raw_written, 3 * planned);
      EXPECT_LT(z->nvme_stored_written, z->nvme_raw_written) << IoEngineName(engine);
      ++runs;
    }
  }
  if (runs == 0) GTEST_SKIP() << "no codec library in this build";
  // Requests off the 4 KiB grid (1.5 KiB blocks: neighbouring frames share
  // blocks) and long coalesced runs cut across the initial weights' writes:
  // still the same bits.
  s.policy.compression.codec = CodecBuiltIn(CodecKind::kZstd) ? CodecKind::kZstd : CodecKind::kLz4;
  s.aio.block_size = Bytes(1536);
  s.policy.write_buffer = Bytes(8 << 20);
  auto odd = Train(s, PosixEnv(), IoEngineKind::kLibaio, 2, nullptr, "run_test_nvme_compressed");
  auto two = Train(Seed(3, OffloadDevice::kNvme, OffloadDevice::kNvme), NewMemEnv().get(), IoEngineKind::kSync, 2);
  ASSERT_TRUE(odd.ok() && two.ok()) << odd.status().message();
  EXPECT_EQ(odd->weights_digest, two->weights_digest);
  EXPECT_EQ(odd->losses, two->losses);
}

// Striping (policy.stripe_paths): the seed's swap files split over two
// directories, through libaio and io_uring on real files (compressed
// too) and in memory: every part holds its share, and the weights and
// losses are the unstriped run's bits.
TEST(Run, StripingSplitsTheSwapFilesAndKeepsTheWeights) {
  Scenario s = Seed(3, OffloadDevice::kNvme, OffloadDevice::kNvme);
  auto plain = Train(s, NewMemEnv().get(), IoEngineKind::kSync, 3);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  const std::string tmp = std::string(testing::BinaryDir()) + "/tmp/run_test_stripe";
  s.policy.stripe_paths = {tmp + "0", tmp + "1"};
  s.hardware.nvme.drives = 2;
  s.aio.block_size = Bytes(256 << 10);  // units of 256 KiB: every file over both drives
  for (IoEngineKind engine : {IoEngineKind::kLibaio, IoEngineKind::kIoUring, IoEngineKind::kSync}) {
    s.policy.compression.codec =
        engine == IoEngineKind::kIoUring && CodecBuiltIn(CodecKind::kZstd) ? CodecKind::kZstd : CodecKind::kNone;
    std::set<std::string> parts;
    auto seen = [&](int, const RunResult&) {  // the parts, while the run holds them
      for (const std::string& dir : s.policy.stripe_paths)
        for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
          if (e.path().extension() == ".swp") parts.insert(e.path().filename().string() + "@" + dir);
      return Status::Ok();
    };
    auto striped =
        Train(s, engine == IoEngineKind::kSync ? NewMemEnv().get() : PosixEnv(), engine, 3,
              engine == IoEngineKind::kSync ? nullptr : std::function<Status(int, const RunResult&)>(seen), "");
    ASSERT_TRUE(striped.ok()) << striped.status().message();
    EXPECT_EQ(striped->weights_digest, plain->weights_digest) << IoEngineName(engine);
    EXPECT_EQ(striped->losses, plain->losses);
    if (engine == IoEngineKind::kSync) continue;
    for (const char* name : {"param16.partition.nvme", "master32", "adam.moments"})
      for (int d = 0; d < 2; ++d)
        EXPECT_TRUE(parts.count(std::string(name) + ".stripe" + std::to_string(d) + ".swp@" + s.policy.stripe_paths[d]))
            << name << " " << d;
  }
}

TEST(Run, RealFilesAndEnginesAgreeAndTheLossFalls) {
  const Scenario s = Seed(3, OffloadDevice::kNvme, OffloadDevice::kNvme);
  auto a = Train(s, PosixEnv(), IoEngineKind::kLibaio, 8);
  auto b = Train(s, PosixEnv(), IoEngineKind::kIoUring, 8);
  auto c = Train(s, NewMemEnv().get(), IoEngineKind::kSync, 8);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status().message() << b.status().message();
  EXPECT_EQ(a->weights_digest, b->weights_digest);
  EXPECT_EQ(a->weights_digest, c->weights_digest);
  EXPECT_EQ(a->losses.size(), 8u);
  EXPECT_LT(a->losses.back(), a->losses.front());
  EXPECT_GT(a->bytes_moved[static_cast<int>(LinkClass::kNvmeRead)].v, 0);
  EXPECT_EQ(a->timeline.source, "run");
  EXPECT_EQ(a->timeline.ops.size(), BuildPlan(s)->ops.size());
}

// Workers per stream overlap transfers and compute; the result does not
// depend on the interleaving.
TEST(Run, ParallelWorkersMatchOneAtATime) {
  Scenario s = Seed(3, OffloadDevice::kNvme, OffloadDevice::kCpu);
  s.training.gradient_accumulation_steps = 2;
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok());
  auto env = NewMemEnv();
  RunOptions o;
  o.steps = 3;
  o.env = env.get();
  o.nvme_dir = "/mem/nvme";
  o.parallel = false;
  auto seq = RunTraining(*plan, o);
  o.parallel = true;
  for (int i = 0; i < 3; ++i) {
    o.compute_threads = 1 + i;  // the model's kernels split among threads: the same bits
    auto par = RunTraining(*plan, o);
    ASSERT_TRUE(seq.ok() && par.ok());
    EXPECT_EQ(par->weights_digest, seq->weights_digest) << o.compute_threads << " compute threads";
    EXPECT_EQ(par->losses, seq->losses);
  }
}

TEST(Run, IoFailuresStopWithErrnoAndPath) {
  auto mem = NewMemEnv();
  FaultInjectionEnv env(mem.get());
  const Scenario s = Seed(3, OffloadDevice::kNvme, OffloadDevice::kNvme);
  env.Inject({FaultSpec::Kind::kNoSpace, 0});
  auto r = Train(s, &env);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ENOSPC"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("run_test_nvme/strata-rank0.run-"), std::string::npos) << r.status().message();
  env.Inject({FaultSpec::Kind::kIoError, 12});
  r = Train(s, &env);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("EIO"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("op "), std::string::npos) << r.status().message();  // names the op
  env.Inject({FaultSpec::Kind::kShortRead, 3});
  r = Train(s, &env);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("short read"), std::string::npos) << r.status().message();
}

// Silent corruption of a swap file (one byte inverted by the device) stops
// the run with the file named; without the checksums the same run "works"
// and trains on the bad bytes. Every byte read back is checked.
TEST(Run, CorruptSwapFilesAreDetected) {
  auto mem = NewMemEnv();
  FaultInjectionEnv env(mem.get());
  const Scenario s = Seed(3, OffloadDevice::kNvme, OffloadDevice::kNvme);
  auto clean = Train(s, &env);
  ASSERT_TRUE(clean.ok()) << clean.status().message();
  EXPECT_GT(clean->swap_verified_bytes, 0u);
  EXPECT_EQ(clean->swap_unverified_bytes, 0u);
  env.Inject({FaultSpec::Kind::kFlipByte, 9});
  auto r = Train(s, &env);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Status::Code::kIOError);
  EXPECT_NE(r.status().message().find("checksum mismatch reading '"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("run_test_nvme/strata-rank0.run-"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("op "), std::string::npos) << r.status().message();
  auto plan = BuildPlan(s);
  RunOptions o;
  o.steps = 3;
  o.env = &env;
  o.engine = IoEngineKind::kSync;
  o.nvme_dir = std::string(testing::BinaryDir()) + "/tmp/run_test_nvme";
  o.swap_checksums = false;
  env.Inject({FaultSpec::Kind::kFlipByte, 9});
  auto blind = RunTraining(*plan, o);
  ASSERT_TRUE(blind.ok()) << blind.status().message();
  EXPECT_NE(blind->weights_digest, clean->weights_digest);
  env.Inject({});
}

// Swap files live in a directory of the run, removed when it ends (success
// or failure) unless kept; a second run on the same directory is refused
// with the holder named, and a killed run's directory is cleared.
TEST(Run, SwapDirectoryIsTheRunsAlone) {
  auto env = NewMemEnv();
  const Scenario s = Seed(3, OffloadDevice::kNvme, OffloadDevice::kNvme);
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok());
  RunOptions o;
  o.steps = 2;
  o.env = env.get();
  o.nvme_dir = "/mem/nvme";
  auto r = RunTraining(*plan, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*env->ListDir("/mem/nvme"), std::vector<std::string>{"strata-rank0.lock"});
  {
    auto held = env->LockFile("/mem/nvme/strata-rank0.lock");
    ASSERT_TRUE(held.ok());
    auto second = RunTraining(*plan, o);
    ASSERT_FALSE(second.ok());
    EXPECT_NE(second.status().message().find("/mem/nvme/strata-rank0.lock' is locked by another run (process "),
              std::string::npos)
        << second.status().message();
  }
  // A killed run's directory (the lock free, Strata's marker in it) is
  // removed; a directory of that name without the marker is someone
  // else's and stays; a kept one stays.
  auto put = [&](const std::string& path, const std::string& text) {
    auto f = env->OpenFile(path, true);
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE((*f)->Write(0, {reinterpret_cast<const std::byte*>(text.data()), text.size()}).ok());
  };
  ASSERT_TRUE(env->CreateNewDir("/mem/nvme/strata-rank0.run-1").ok());
  put("/mem/nvme/strata-rank0.run-1/master32.swp", "x");
  put("/mem/nvme/strata-rank0.run-1/STRATA-RUN", "strata run directory: rank 0, process 1, host h\n");
  ASSERT_TRUE(env->CreateNewDir("/mem/nvme/strata-rank0.run-users").ok());
  put("/mem/nvme/strata-rank0.run-users/thesis.tex", "years of work");
  o.keep_swap_files = true;
  r = RunTraining(*plan, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto names = *env->ListDir("/mem/nvme");
  ASSERT_EQ(names.size(), 3u);
  EXPECT_EQ(names[1].rfind("strata-rank0.run-", 0), 0u);  // after "strata-rank0.lock"
  EXPECT_NE(names[1], "strata-rank0.run-1");
  EXPECT_EQ(names[2], "strata-rank0.run-users");
  EXPECT_TRUE(env->OpenFile("/mem/nvme/strata-rank0.run-users/thesis.tex", false).ok());
  EXPECT_TRUE(env->OpenFile("/mem/nvme/" + names[1] + "/STRATA-RUN", false).ok());
  // A failed run removes its directory too.
  o.keep_swap_files = false;
  ASSERT_TRUE(env->RemoveTree("/mem/nvme/" + names[1]).ok());
  FaultInjectionEnv faulty(env.get());
  faulty.Inject({FaultSpec::Kind::kIoError, 5});
  o.env = &faulty;
  ASSERT_FALSE(RunTraining(*plan, o).ok());
  EXPECT_EQ(*env->ListDir("/mem/nvme"), (std::vector<std::string>{"strata-rank0.lock", "strata-rank0.run-users"}));
}

// A run saved every 2 steps, stopped at step 4 and resumed to step 6 ends
// with the weights and losses of the uninterrupted 6-step run; also when it
// resumes under another placement or ZeRO stage (the checkpoint is in
// parameter-group coordinates). A damaged file is refused by name.
TEST(Run, ResumedRunsEndWhereUninterruptedOnesDo) {
  auto env = NewMemEnv();
  auto run = [&](const Scenario& s, int steps, int save_every, const std::string& resume) {
    auto plan = BuildPlan(s);
    EXPECT_TRUE(plan.ok());
    RunOptions o;
    o.steps = steps;
    o.env = env.get();
    o.nvme_dir = "/mem/nvme";
    o.save_every = save_every;
    o.checkpoint_dir = "/mem/ck";
    o.resume_dir = resume;
    return RunTraining(*plan, o);
  };
  const Scenario nvme = Seed(3, OffloadDevice::kNvme, OffloadDevice::kNvme);
  auto whole = run(nvme, 6, 0, "");
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  auto first = run(nvme, 4, 2, "");
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ(first->checkpoints, (std::vector<std::string>{"/mem/ck/global_step2", "/mem/ck/global_step4"}));
  EXPECT_EQ(first->losses, std::vector<double>(whole->losses.begin(), whole->losses.begin() + 4));
  const std::vector<std::pair<const char*, Scenario>> resumes = {
      {"same placement", nvme},
      {"optimizer on cpu, params on gpu", Seed(3, OffloadDevice::kNone, OffloadDevice::kCpu)},
      {"stage 1", Seed(1, OffloadDevice::kNone, OffloadDevice::kNone)},
      {"stage 2, optimizer on cpu", Seed(2, OffloadDevice::kNone, OffloadDevice::kCpu)}};
  for (const auto& [what, s] : resumes) {
    auto rest = run(s, 6, 0, "/mem/ck");
    ASSERT_TRUE(rest.ok()) << what << ": " << rest.status().message();
    EXPECT_EQ(rest->first_step, 4) << what;
    EXPECT_EQ(rest->resumed_from, "/mem/ck/global_step4") << what;
    EXPECT_EQ(rest->weights_digest, whole->weights_digest) << what;
    EXPECT_EQ(rest->losses, whole->losses) << what;
    EXPECT_EQ(rest->loss_scale, whole->loss_scale) << what;
  }
  // Without the moments (a resume that dropped them) the weights differ:
  // the comparison above can fail.
  auto fresh = run(nvme, 2, 0, "");
  ASSERT_TRUE(fresh.ok());
  EXPECT_NE(fresh->weights_digest, whole->weights_digest);
  // Nothing left to run; a damaged file; a checkpoint of another model.
  auto done = run(nvme, 4, 0, "/mem/ck");
  ASSERT_FALSE(done.ok());
  EXPECT_EQ(done.status().code(), Status::Code::kInvalidArgument);
  auto f = env->OpenFile("/mem/ck/global_step4/zero_pp_rank_0_mp_rank_00_optim_states.bin", false);
  ASSERT_TRUE(f.ok());
  std::byte b[1];
  ASSERT_TRUE((*f)->Read(100, b).ok());
  b[0] = ~b[0];
  ASSERT_TRUE((*f)->Write(100, b).ok());
  auto damaged = run(nvme, 6, 0, "/mem/ck");
  ASSERT_FALSE(damaged.ok());
  EXPECT_NE(damaged.status().message().find("global_step4/zero_pp_rank_0_mp_rank_00_optim_states.bin' is damaged"),
            std::string::npos)
      << damaged.status().message();
  Scenario other = nvme;
  other.model.sizes = {1000, 999, 10};
  auto wrong = run(other, 6, 0, "/mem/ck");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("a checkpoint of another model"), std::string::npos)
      << wrong.status().message();
}

// The checkpoint directory is locked as the swap directory is: a second
// run saving into it is refused with the holder named.
TEST(Run, TwoRunsNeverShareACheckpointDirectory) {
  auto env = NewMemEnv();
  const Scenario s = Seed(3, OffloadDevice::kNone, OffloadDevice::kNone);
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok());
  RunOptions o;
  o.steps = 2;
  o.env = env.get();
  o.nvme_dir = "/mem/nvme";
  o.save_every = 1;
  o.checkpoint_dir = "/mem/ck";
  auto held = env->LockFile("/mem/ck/strata-checkpoint-rank0.lock");
  ASSERT_TRUE(held.ok());
  auto r = RunTraining(*plan, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/mem/ck/strata-checkpoint-rank0.lock' is locked by another run (process "),
            std::string::npos)
      << r.status().message();
  held->reset();
  r = RunTraining(*plan, o);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->checkpoints.size(), 2u);
}

TEST(Run, UnwritableNvmePathIsAnError) {
  const Scenario s = Seed(3, OffloadDevice::kNvme, OffloadDevice::kNvme);
  auto plan = BuildPlan(s);
  RunOptions o;
  o.nvme_dir = "/proc/strata_cannot_create_this";
  auto r = RunTraining(*plan, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/proc/strata_cannot_create_this"), std::string::npos) << r.status().message();
}

TEST(Run, DeviceMemoryIsCapped) {
  Scenario s = Seed(0, OffloadDevice::kNone, OffloadDevice::kNone);
  s.hardware.gpu.memory = Bytes(10'000'000);  // 16 bytes x 1M parameters do not fit
  auto plan = BuildPlan(s);
  ASSERT_TRUE(plan.ok());
  RunOptions o;
  o.env = NewMemEnv().release();
  auto r = RunTraining(*plan, o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("gpu tier over capacity"), std::string::npos) << r.status().message();
  delete o.env;
}

}  // namespace
}  // namespace strata::exec
