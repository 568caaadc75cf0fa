#include "runtime/checkpoint.h"

#include <xxhash.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <nlohmann/json.hpp>

#include "strata/executor/comm.h"

namespace strata::exec {
namespace {

constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'C', 'K'};
constexpr uint32_t kVersion = 1;
constexpr const char* kManifest = "strata_checkpoint.json";

// DeepSpeed's _get_rank_zero_ckpt_name, with Strata's extension.
std::string RankFile(int rank, bool bf16) {
  return std::string(bf16 ? "bf16_" : "") + "zero_pp_rank_" + std::to_string(rank) + "_mp_rank_00_optim_states.bin";
}
std::string Tag(int steps) { return "global_step" + std::to_string(steps); }

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// Writes bytes at the end of a file, hashing them as they go.
class Appender {
 public:
  explicit Appender(File* f) : f_(f) { XXH3_64bits_reset(state_); }
  ~Appender() { XXH3_freeState(state_); }
  Appender(const Appender&) = delete;
  Appender& operator=(const Appender&) = delete;
  Status Put(const void* p, size_t n) {
    if (n == 0) return Status::Ok();
    STRATA_RETURN_IF_ERROR(f_->Write(at_, {static_cast<const std::byte*>(p), n}));
    XXH3_64bits_update(state_, p, n);
    at_ += n;
    return Status::Ok();
  }
  uint64_t bytes() const { return at_; }
  uint64_t hash() const { return XXH3_64bits_digest(state_); }

 private:
  File* f_;
  XXH3_state_t* state_ = XXH3_createState();
  uint64_t at_ = 0;
};

Result<std::string> ReadAll(Env* env, const std::string& path) {
  auto f = env->OpenFile(path, false);
  if (!f.ok()) return f.status();
  std::string s((*f)->size(), '\0');
  STRATA_RETURN_IF_ERROR((*f)->Read(0, {reinterpret_cast<std::byte*>(s.data()), s.size()}));
  return s;
}

Status WriteDurably(Env* env, const std::string& path, const std::string& text) {
  STRATA_RETURN_IF_ERROR(env->RemoveFile(path));
  auto f = env->CreateNewFile(path);
  if (!f.ok()) return f.status();
  STRATA_RETURN_IF_ERROR((*f)->Write(0, {reinterpret_cast<const std::byte*>(text.data()), text.size()}));
  return (*f)->Sync();
}

}  // namespace

Status SaveCheckpoint(Env* env, const std::string& dir, const Plan& plan, Comm& comm, const CheckpointScalars& sc,
                      const RankState& mine, bool bf16, bool kill_after_files) {
  const std::string tag = Tag(sc.global_steps), final_dir = dir + "/" + tag, tmp = final_dir + ".tmp";
  Status st;
  if (comm.rank() == 0) {
    st = env->CreateDir(dir);
    if (st.ok()) st = env->RemoveTree(tmp);  // a crashed save's leftovers
    if (st.ok()) st = env->CreateNewDir(tmp);
  }
  // Every rank learns whether rank 0 could start; then each writes its file.
  if (comm.AnyTrue(!st.ok())) return st.ok() ? Status::IOError("checkpoint: rank 0 could not create '" + tmp + "'") : st;
  uint64_t sum[2] = {0, 0};  // bytes, XXH3
  {
    auto f = env->CreateNewFile(tmp + "/" + RankFile(comm.rank(), bf16));
    if (!f.ok()) st = f.status();
    if (st.ok()) {
      Appender out(f->get());
      const uint32_t head[2] = {kVersion, static_cast<uint32_t>(mine.segments.size())};
      st = out.Put(kMagic, sizeof kMagic);
      if (st.ok()) st = out.Put(head, sizeof head);
      for (const StateSegment& s : mine.segments) {
        const int64_t rec[3] = {s.group, s.start, s.count};
        if (st.ok()) st = out.Put(rec, sizeof rec);
      }
      for (const std::vector<float>* v : {&mine.master, &mine.exp_avg, &mine.exp_avg_sq})
        if (st.ok()) st = out.Put(v->data(), v->size() * sizeof(float));
      if (st.ok()) st = (*f)->Sync();
      sum[0] = out.bytes();
      sum[1] = out.hash();
    }
  }
  if (kill_after_files) std::raise(SIGKILL);
  if (comm.AnyTrue(!st.ok())) return st.ok() ? Status::IOError("checkpoint: another rank failed writing '" + tmp + "'") : st;
  std::vector<uint64_t> all(2 * static_cast<size_t>(comm.size()));
  comm.Allgather(sum, all.data(), sizeof sum);
  if (comm.rank() == 0) {
    nlohmann::ordered_json j;
    j["format"] = "strata-checkpoint-1";
    j["tag"] = tag;
    j["global_steps"] = sc.global_steps;
    j["world_size"] = plan.world_size;
    j["zero_stage"] = plan.zero_stage;
    j["adam_steps"] = sc.adam_steps;
    j["loss_scaler"] = {{"cur_scale", sc.loss_scale}, {"good_steps", sc.good_steps}};
    j["skipped_steps"] = sc.skipped_steps;
    j["losses"] = sc.losses;
    j["loss_scales"] = sc.loss_scales;
    j["step_skipped"] = sc.step_skipped;
    nlohmann::ordered_json groups = nlohmann::ordered_json::array();
    for (const PlanParamGroup& g : plan.param_groups) groups.push_back({{"name", g.name}, {"elements", g.elements.v}});
    j["param_groups"] = groups;
    nlohmann::ordered_json files = nlohmann::ordered_json::array();
    for (int r = 0; r < comm.size(); ++r)
      files.push_back({{"name", RankFile(r, bf16)}, {"bytes", all[2 * r]}, {"xxh3", Hex(all[2 * r + 1])}});
    j["files"] = files;
    st = WriteDurably(env, tmp + "/" + kManifest, j.dump(1) + "\n");
    if (st.ok()) st = env->SyncDir(tmp);
    // A directory of this tag from a run that crashed before updating
    // `latest` is not the latest: replaced.
    if (st.ok()) st = env->RemoveTree(final_dir);
    if (st.ok()) st = env->RenameFile(tmp, final_dir);
    if (st.ok()) st = WriteDurably(env, dir + "/latest.tmp", tag + "\n");
    if (st.ok()) st = env->RenameFile(dir + "/latest.tmp", dir + "/latest");
    if (st.ok()) st = env->SyncDir(dir);
  }
  if (comm.AnyTrue(!st.ok())) return st.ok() ? Status::IOError("checkpoint: rank 0 failed to publish '" + final_dir + "'") : st;
  return Status::Ok();
}

Result<LoadedCheckpoint> LoadCheckpoint(Env* env, const std::string& dir, const Plan& plan,
                                        const std::vector<StateSegment>& want) {
  auto latest = ReadAll(env, dir + "/latest");
  if (!latest.ok())
    return Status::InvalidArgument("no checkpoint to resume in '" + dir + "': " + latest.status().message());
  std::string tag = *latest;
  while (!tag.empty() && (tag.back() == '\n' || tag.back() == ' ')) tag.pop_back();
  LoadedCheckpoint out;
  out.path = dir + "/" + tag;
  const std::string mpath = out.path + "/" + kManifest;
  auto text = ReadAll(env, mpath);
  if (!text.ok()) return text.status();
  auto j = nlohmann::json::parse(*text, nullptr, false);
  auto bad = [&](const std::string& why) { return Status::InvalidArgument("checkpoint manifest '" + mpath + "': " + why); };
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != "strata-checkpoint-1")
    return bad("not a Strata checkpoint manifest (format strata-checkpoint-1)");
  try {
    CheckpointScalars& sc = out.scalars;
    sc.global_steps = j.at("global_steps").get<int>();
    sc.adam_steps = j.at("adam_steps").get<int64_t>();
    sc.loss_scale = j.at("loss_scaler").at("cur_scale").get<float>();
    sc.good_steps = j.at("loss_scaler").at("good_steps").get<int>();
    sc.skipped_steps = j.at("skipped_steps").get<int>();
    sc.losses = j.at("losses").get<std::vector<double>>();
    sc.loss_scales = j.at("loss_scales").get<std::vector<double>>();
    sc.step_skipped = j.at("step_skipped").get<std::vector<bool>>();
    const auto& groups = j.at("param_groups");
    if (groups.size() != plan.param_groups.size())
      return bad("it has " + std::to_string(groups.size()) + " parameter groups, this model " +
                 std::to_string(plan.param_groups.size()) + ": a checkpoint of another model");
    for (size_t g = 0; g < groups.size(); ++g) {
      const PlanParamGroup& pg = plan.param_groups[g];
      if (groups[g].at("name").get<std::string>() != pg.name || groups[g].at("elements").get<int64_t>() != pg.elements.v)
        return bad("parameter group " + std::to_string(g) + " is '" + groups[g].at("name").get<std::string>() + "' of " +
                   std::to_string(groups[g].at("elements").get<int64_t>()) + " elements, this model's '" + pg.name +
                   "' of " + std::to_string(pg.elements.v) + ": a checkpoint of another model");
      out.master.emplace_back(static_cast<size_t>(pg.elements.v), 0.0f);
    }
    if (static_cast<int>(sc.losses.size()) != sc.global_steps || sc.loss_scales.size() != sc.losses.size() ||
        sc.step_skipped.size() != sc.losses.size())
      return bad("the per-step histories do not have global_steps entries");
    // Wanted moment segments, at their offsets in the output.
    size_t total = 0;
    std::vector<size_t> at;
    for (const StateSegment& w : want) at.push_back(total), total += static_cast<size_t>(w.count);
    out.exp_avg.assign(total, 0.0f);
    out.exp_avg_sq.assign(total, 0.0f);
    std::vector<std::vector<char>> covered(plan.param_groups.size());
    for (size_t g = 0; g < covered.size(); ++g) covered[g].assign(static_cast<size_t>(plan.param_groups[g].elements.v), 0);
    for (const auto& fj : j.at("files")) {
      const std::string path = out.path + "/" + fj.at("name").get<std::string>();
      auto data = ReadAll(env, path);
      if (!data.ok()) return data.status();
      const std::string want_sum = fj.at("xxh3").get<std::string>();
      if (data->size() != fj.at("bytes").get<uint64_t>() || Hex(XXH3_64bits(data->data(), data->size())) != want_sum)
        return Status::IOError("checkpoint file '" + path + "' is damaged: " + std::to_string(data->size()) +
                               " bytes with XXH3 " + Hex(XXH3_64bits(data->data(), data->size())) + ", the manifest says " +
                               std::to_string(fj.at("bytes").get<uint64_t>()) + " bytes with " + want_sum);
      const char* p = data->data();
      const char* end = p + data->size();
      uint32_t head[2];
      if (data->size() < sizeof kMagic + sizeof head || std::memcmp(p, kMagic, sizeof kMagic) != 0)
        return Status::IOError("'" + path + "' is not a Strata optimizer-state file");
      std::memcpy(head, p + sizeof kMagic, sizeof head);
      p += sizeof kMagic + sizeof head;
      if (head[0] != kVersion) return Status::IOError("'" + path + "': format version " + std::to_string(head[0]));
      std::vector<StateSegment> segs(head[1]);
      int64_t values = 0;
      for (StateSegment& s : segs) {
        int64_t rec[3];
        if (end - p < static_cast<ptrdiff_t>(sizeof rec)) return Status::IOError("'" + path + "' is truncated");
        std::memcpy(rec, p, sizeof rec);
        p += sizeof rec;
        s = {static_cast<int>(rec[0]), rec[1], rec[2]};
        if (s.group < 0 || s.group >= static_cast<int>(plan.param_groups.size()) || s.start < 0 || s.count < 0 ||
            s.start + s.count > plan.param_groups[static_cast<size_t>(s.group)].elements.v)
          return Status::IOError("'" + path + "': a segment outside its parameter group");
        values += s.count;
      }
      if (end - p != static_cast<ptrdiff_t>(3 * values * sizeof(float)))
        return Status::IOError("'" + path + "' has " + std::to_string(end - p) + " bytes of state for " +
                               std::to_string(values) + " values of three arrays");
      const float* arr[3];
      for (int a = 0; a < 3; ++a) arr[a] = reinterpret_cast<const float*>(p) + a * values;  // copied out below
      int64_t off = 0;
      for (const StateSegment& s : segs) {
        std::vector<float> tmp(static_cast<size_t>(s.count));
        std::memcpy(tmp.data(), reinterpret_cast<const char*>(arr[0]) + off * 4, tmp.size() * 4);
        std::copy(tmp.begin(), tmp.end(), out.master[static_cast<size_t>(s.group)].begin() + s.start);
        std::fill_n(covered[static_cast<size_t>(s.group)].begin() + s.start, s.count, 1);
        for (size_t w = 0; w < want.size(); ++w) {
          if (want[w].group != s.group) continue;
          const int64_t lo = std::max(want[w].start, s.start), hi = std::min(want[w].start + want[w].count, s.start + s.count);
          if (lo >= hi) continue;
          const size_t n = static_cast<size_t>(hi - lo);
          std::memcpy(out.exp_avg.data() + at[w] + (lo - want[w].start), reinterpret_cast<const char*>(arr[1]) + (off + lo - s.start) * 4, n * 4);
          std::memcpy(out.exp_avg_sq.data() + at[w] + (lo - want[w].start), reinterpret_cast<const char*>(arr[2]) + (off + lo - s.start) * 4, n * 4);
        }
        off += s.count;
      }
    }
    for (size_t g = 0; g < covered.size(); ++g)
      if (std::find(covered[g].begin(), covered[g].end(), 0) != covered[g].end())
        return bad("no file holds all of parameter group '" + plan.param_groups[g].name + "'");
  } catch (const nlohmann::json::exception& e) {
    return bad(std::string("a field is missing or of the wrong type: ") + e.what());
  }
  return out;
}

}  // namespace strata::exec
