// Checkpoints refuse what was edited or damaged, naming the file, and
// bound every count and offset they read by the file that holds it; a run
// does not save over another run's checkpoints unless told to, and
// --keep-last prunes the oldest.
#include <gtest/gtest.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "runtime/checkpoint.h"
#include "strata/executor/runner.h"
#include "strata/planner/planner.h"
#include "test_util.h"

namespace strata::exec {
namespace {

constexpr char kRankFile[] = "/mem/ck/global_step2/zero_pp_rank_0_mp_rank_00_optim_states.bin";
constexpr char kManifest[] = "/mem/ck/global_step2/strata_checkpoint.json";

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// The seed MLP, ZeRO-3, trained 2 steps with a checkpoint at step 2 in
// /mem/ck; helpers to read, edit and re-seal its files (recompute the
// checksums as checkpoint.h defines them), as a deliberate forger would.
class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    s_ = testing::Builtin("seed");
    auto plan = BuildPlan(s_);
    ASSERT_TRUE(plan.ok()) << plan.status().message();
    plan_ = *plan;
    auto r = Train(2, 2, "");
    ASSERT_TRUE(r.ok()) << r.status().message();
  }
  Result<RunResult> Train(int steps, int save_every, const std::string& resume, bool overwrite = false,
                          int keep_last = 0, const std::string& dir = "/mem/ck") {
    RunOptions o;
    o.steps = steps;
    o.env = env_.get();
    o.nvme_dir = "/mem/nvme";
    o.save_every = save_every;
    o.checkpoint_dir = dir;
    o.resume_dir = resume;
    o.overwrite_checkpoints = overwrite;
    o.keep_last = keep_last;
    return RunTraining(plan_, o);
  }
  std::string Read(const std::string& path) {
    auto f = env_->OpenFile(path, false);
    EXPECT_TRUE(f.ok()) << path;
    if (!f.ok()) return "";
    std::string s((*f)->size(), '\0');
    EXPECT_TRUE((*f)->Read(0, {reinterpret_cast<std::byte*>(s.data()), s.size()}).ok());
    return s;
  }
  void Write(const std::string& path, const std::string& text) {
    ASSERT_TRUE(env_->RemoveFile(path).ok());
    auto f = env_->CreateNewFile(path);
    ASSERT_TRUE(f.ok()) << path;
    ASSERT_TRUE((*f)->Write(0, {reinterpret_cast<const std::byte*>(text.data()), text.size()}).ok());
  }
  nlohmann::ordered_json Manifest() { return nlohmann::ordered_json::parse(Read(kManifest)); }
  // Writes `m` with its checksum, and the rank file's size and checksum
  // recomputed from `rank_file`.
  void Seal(nlohmann::ordered_json m, const std::string& rank_file) {
    Write(kRankFile, rank_file);
    m["files"][0]["bytes"] = rank_file.size();
    m["files"][0]["xxh3"] = Hex(XXH3_64bits(rank_file.data(), rank_file.size()));
    m.erase("manifest_xxh3");
    const std::string body = m.dump();
    m["manifest_xxh3"] = Hex(XXH3_64bits(body.data(), body.size()));
    Write(kManifest, m.dump(1));
  }
  Status Load() {
    auto c = LoadCheckpoint(env_.get(), "/mem/ck", plan_, {});
    return c.ok() ? Status::Ok() : c.status();
  }

  std::unique_ptr<Env> env_ = NewMemEnv();
  Scenario s_;
  Plan plan_;
};

#define EXPECT_REFUSED(st, text)                                                                                   \
  do {                                                                                                             \
    const Status st_ = (st);                                                                                       \
    EXPECT_FALSE(st_.ok());                                                                                        \
    EXPECT_NE(st_.message().find(text), std::string::npos) << "expected '" << (text) << "' in: " << st_.message(); \
  } while (0)

// Any value of the manifest a resume reads is under its checksum: an edit
// of the Adam step count (a different bias correction, another result) is
// refused, as is a manifest without its checksum.
TEST_F(CheckpointTest, AnEditedManifestIsRefused) {
  ASSERT_TRUE(Load().ok());
  const std::string text = Read(kManifest);
  std::string edited = text;
  const size_t at = edited.find("\"adam_steps\": ");
  ASSERT_NE(at, std::string::npos) << text;
  edited.insert(at + 14, "1");  // 2 -> 12
  Write(kManifest, edited);
  EXPECT_REFUSED(Load(), "is damaged or was edited");
  auto r = Train(4, 0, "/mem/ck");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ExitCode(), 1);
  nlohmann::ordered_json m = nlohmann::ordered_json::parse(text);
  m.erase("manifest_xxh3");
  Write(kManifest, m.dump(1));
  EXPECT_REFUSED(Load(), "it has no checksum of its own");
  Write(kManifest, text);
  EXPECT_TRUE(Load().ok());
}

// A forger who recomputes every checksum still cannot make a resume read
// past a file or allocate what the file does not hold.
TEST_F(CheckpointTest, CountsAndOffsetsAreBoundedByTheFile) {
  const nlohmann::ordered_json m = Manifest();
  const std::string file = Read(kRankFile);
  ASSERT_GT(file.size(), 16u + 24u);
  Seal(m, file);
  ASSERT_TRUE(Load().ok()) << "the re-sealing itself is faithful";
  std::string f = file;
  const uint32_t many = 0xFFFFFFFFu;
  std::memcpy(f.data() + 12, &many, 4);  // after the magic and the version
  Seal(m, f);
  EXPECT_REFUSED(Load(), "claims 4294967295 segments, more than its");
  for (const auto& [start, count] : std::vector<std::pair<int64_t, int64_t>>{
           {std::numeric_limits<int64_t>::max() - 1, 10}, {0, std::numeric_limits<int64_t>::max()}, {-5, 10}}) {
    f = file;
    std::memcpy(f.data() + 16 + 8, &start, 8);
    std::memcpy(f.data() + 16 + 16, &count, 8);
    Seal(m, f);
    EXPECT_REFUSED(Load(), "a segment outside its parameter group");
  }
  f = file;
  const int64_t group = 1 << 30;
  std::memcpy(f.data() + 16, &group, 8);
  Seal(m, f);
  EXPECT_REFUSED(Load(), "a segment outside its parameter group (group 1073741824");
  Seal(m, file + std::string(4, '\0'));
  EXPECT_REFUSED(Load(), "a checkpoint of this model can hold");
  Seal(m, file.substr(0, file.size() - 4));
  EXPECT_REFUSED(Load(), "its segments hold more values than its");
  // Names from the manifest and `latest` stay inside the directory.
  nlohmann::ordered_json out = m;
  out["files"][0]["name"] = "../../nvme/escape.bin";
  Seal(out, file);
  EXPECT_REFUSED(Load(), "a file name that is not a name in its directory: '../../nvme/escape.bin'");
  Seal(m, file);
  Write("/mem/ck/latest", "../elsewhere\n");
  EXPECT_REFUSED(Load(), "names '../elsewhere', not a checkpoint in that directory");
  Write("/mem/ck/latest", "global_step2\n");
  // Values in range only, even when sealed.
  out = m;
  out["adam_steps"] = -1;
  Seal(out, file);
  EXPECT_REFUSED(Load(), "its step counters or loss scale are out of range");
  out = m;
  out["loss_scaler"]["cur_scale"] = 0.0;
  Seal(out, file);
  EXPECT_REFUSED(Load(), "out of range");
  out = m;
  out["world_size"] = 2;
  Seal(out, file);
  EXPECT_REFUSED(Load(), "it lists 1 rank files for a world of 2");
  Seal(m, file);
  EXPECT_TRUE(Load().ok());
}

// A fresh run does not save over another run's checkpoints (it would move
// `latest` back and mix their folders) unless told to overwrite them; a run
// resumed from the directory saves into it.
TEST_F(CheckpointTest, SavingOverAnotherRunsCheckpointsNeedsOverwrite) {
  auto r = Train(3, 1, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().ExitCode(), 2);
  EXPECT_REFUSED(r.status(),
                 "'/mem/ck' holds another run's checkpoints (latest: global_step2): continue it with --resume");
  EXPECT_EQ(Read("/mem/ck/latest"), "global_step2\n") << "nothing was lost";
  r = Train(3, 1, "/mem/ck");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->checkpoints, std::vector<std::string>{"/mem/ck/global_step3"});
  r = Train(1, 1, "", /*overwrite=*/true);
  ASSERT_TRUE(r.ok()) << r.status().message();
  auto names = env_->ListDir("/mem/ck");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"global_step1", "latest", "strata-checkpoint-rank0.lock"}));
  EXPECT_EQ(Read("/mem/ck/latest"), "global_step1\n");
}

// --keep-last N keeps the newest N checkpoints after each save; folders
// that are not checkpoints (no manifest) are never touched.
TEST_F(CheckpointTest, KeepLastPrunesTheOldest) {
  ASSERT_TRUE(env_->CreateDir("/mem/ck2/global_step0").ok());
  Write("/mem/ck2/global_step0/notes.txt", "mine");
  auto r = Train(5, 1, "", false, /*keep_last=*/2, "/mem/ck2");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->checkpoints.size(), 5u);
  auto names = env_->ListDir("/mem/ck2");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names, (std::vector<std::string>{"global_step0", "global_step4", "global_step5", "latest",
                                              "strata-checkpoint-rank0.lock"}));
  EXPECT_EQ(Read("/mem/ck2/global_step0/notes.txt"), "mine");
  r = Train(7, 1, "/mem/ck2", false, /*keep_last=*/1, "/mem/ck2");
  ASSERT_TRUE(r.ok()) << r.status().message();
  names = env_->ListDir("/mem/ck2");
  ASSERT_TRUE(names.ok());
  EXPECT_EQ(*names,
            (std::vector<std::string>{"global_step0", "global_step7", "latest", "strata-checkpoint-rank0.lock"}));
}

}  // namespace
}  // namespace strata::exec
