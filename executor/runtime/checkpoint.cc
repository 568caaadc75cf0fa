#include "runtime/checkpoint.h"

#include <xxhash.h>

#include <algorithm>
#include <cmath>
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

// A manifest holds a few numbers per step: 256 MiB is millions of steps.
constexpr uint64_t kManifestLimit = uint64_t{256} << 20;

// The whole of `path`, refused unless it has `want` bytes (the manifest's
// word for a rank file) or at most `limit` bytes, before any is read.
Result<std::string> ReadAll(Env* env, const std::string& path, uint64_t limit, const uint64_t* want = nullptr) {
  STRATA_ASSIGN_OR_RETURN(auto f, env->OpenFile(path, false));
  const uint64_t size = (f)->size();
  if (want != nullptr && size != *want)
    return Status::IOError("checkpoint file '" + path + "' is damaged: " + std::to_string(size) +
                           " bytes, the manifest says " + std::to_string(*want));
  if (size > limit)
    return Status::IOError("checkpoint file '" + path + "' has " + std::to_string(size) + " bytes, over the " +
                           std::to_string(limit) + " a checkpoint of this model can hold");
  std::string s(size, '\0');
  STRATA_RETURN_IF_ERROR((f)->Read(0, {reinterpret_cast<std::byte*>(s.data()), s.size()}));
  return s;
}

// A tag or file name the manifest or `latest` gives: one name in the
// checkpoint directory, never a path out of it.
bool PlainName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

// "global_stepN" -> N, or -1.
int64_t StepOfTag(const std::string& name) {
  constexpr std::string_view kPrefix = "global_step";
  if (name.size() <= kPrefix.size() || name.size() > kPrefix.size() + 12 ||
      name.compare(0, kPrefix.size(), kPrefix) != 0)
    return -1;
  int64_t n = 0;
  for (size_t i = kPrefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

// The manifest's own checksum: XXH3-64 of its compact JSON without the
// "manifest_xxh3" key (the parsed and re-serialized text is the text
// written: nlohmann keeps the keys' order and round-trips every number).
std::string ManifestSum(nlohmann::ordered_json j) {
  j.erase("manifest_xxh3");
  const std::string text = j.dump();
  return Hex(XXH3_64bits(text.data(), text.size()));
}

// The tag `dir/latest` holds (at most 4 KiB), its trailing newline dropped.
Result<std::string> LatestTag(Env* env, const std::string& dir) {
  STRATA_ASSIGN_OR_RETURN(auto text, ReadAll(env, dir + "/latest", 4096));
  std::string tag = text;
  while (!tag.empty() && (tag.back() == '\n' || tag.back() == ' ')) tag.pop_back();
  return tag;
}

bool HasManifest(Env* env, const std::string& dir) { return env->OpenFile(dir + "/" + kManifest, false).ok(); }

// Keeps the newest `keep` checkpoints of `dir` (by step), always `latest`'s.
Status Prune(Env* env, const std::string& dir, int keep, const std::string& latest) {
  STRATA_ASSIGN_OR_RETURN(auto names, env->ListDir(dir));
  std::vector<std::pair<int64_t, std::string>> ckpts;
  for (const std::string& n : names)
    if (n != latest && StepOfTag(n) >= 0 && HasManifest(env, dir + "/" + n)) ckpts.emplace_back(StepOfTag(n), n);
  std::sort(ckpts.rbegin(), ckpts.rend());  // newest first
  for (size_t i = static_cast<size_t>(std::max(keep - 1, 0)); i < ckpts.size(); ++i)
    STRATA_RETURN_IF_ERROR(env->RemoveTree(dir + "/" + ckpts[i].second));
  return Status::Ok();
}

Status WriteDurably(Env* env, const std::string& path, const std::string& text) {
  STRATA_RETURN_IF_ERROR(env->RemoveFile(path));
  STRATA_ASSIGN_OR_RETURN(auto f, env->CreateNewFile(path));
  STRATA_RETURN_IF_ERROR((f)->Write(0, {reinterpret_cast<const std::byte*>(text.data()), text.size()}));
  return (f)->Sync();
}

}  // namespace

Status SaveCheckpoint(Env* env, const std::string& dir, const Plan& plan, Comm& comm, const CheckpointScalars& sc,
                      const RankState& mine, const SaveOptions& opt) {
  const std::string tag = Tag(sc.global_steps), final_dir = dir + "/" + tag, tmp = final_dir + ".tmp";
  Status st;
  if (comm.rank() == 0) {
    st = env->CreateDir(dir);
    if (st.ok()) st = env->RemoveTree(tmp);  // a crashed save's leftovers
    if (st.ok()) st = env->CreateNewDir(tmp);
  }
  // Every rank learns whether rank 0 could start; then each writes its file.
  if (comm.AnyTrue(!st.ok()))
    return st.ok() ? Status::IOError("checkpoint: rank 0 could not create '" + tmp + "'") : st;
  uint64_t sum[2] = {0, 0};  // bytes, XXH3
  {
    auto f = env->CreateNewFile(tmp + "/" + RankFile(comm.rank(), opt.bf16));
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
  if (opt.kill_after_files) std::raise(SIGKILL);
  if (comm.AnyTrue(!st.ok()))
    return st.ok() ? Status::IOError("checkpoint: another rank failed writing '" + tmp + "'") : st;
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
      files.push_back({{"name", RankFile(r, opt.bf16)}, {"bytes", all[2 * r]}, {"xxh3", Hex(all[2 * r + 1])}});
    j["files"] = files;
    j["manifest_xxh3"] = ManifestSum(j);
    st = WriteDurably(env, tmp + "/" + kManifest, j.dump(1) + "\n");
    if (st.ok()) st = env->SyncDir(tmp);
    // A directory of this tag from a run that crashed before updating
    // `latest` is not the latest: replaced.
    if (st.ok() && env->ListDir(final_dir).ok() && !HasManifest(env, final_dir))
      st = Status::IOError("checkpoint: '" + final_dir + "' is in the way and is not a checkpoint (no " + kManifest +
                           "): left as it is");
    if (st.ok()) st = env->RemoveTree(final_dir);
    if (st.ok()) st = env->RenameFile(tmp, final_dir);
    if (st.ok()) st = WriteDurably(env, dir + "/latest.tmp", tag + "\n");
    if (st.ok()) st = env->RenameFile(dir + "/latest.tmp", dir + "/latest");
    if (st.ok()) st = env->SyncDir(dir);
    if (st.ok() && opt.keep_last > 0) st = Prune(env, dir, opt.keep_last, tag);
  }
  if (comm.AnyTrue(!st.ok()))
    return st.ok() ? Status::IOError("checkpoint: rank 0 failed to publish '" + final_dir + "'") : st;
  return Status::Ok();
}

Result<std::string> CheckpointsIn(Env* env, const std::string& dir) {
  auto names = env->ListDir(dir);
  if (!names.ok())
    return names.status().code() == Status::Code::kNotFound ? Result<std::string>(std::string()) : names.status();
  if (auto tag = LatestTag(env, dir); tag.ok()) return "latest: " + *tag;
  for (const std::string& n : *names)
    if (StepOfTag(n) >= 0 && HasManifest(env, dir + "/" + n)) return n;
  return std::string();
}

Status RemoveCheckpoints(Env* env, const std::string& dir) {
  auto names = env->ListDir(dir);
  if (!names.ok()) return names.status().code() == Status::Code::kNotFound ? Status::Ok() : names.status();
  for (const std::string& n : *names) {
    const bool tmp = n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0;
    if (StepOfTag(tmp ? n.substr(0, n.size() - 4) : n) >= 0 && (tmp || HasManifest(env, dir + "/" + n)))
      STRATA_RETURN_IF_ERROR(env->RemoveTree(dir + "/" + n));
  }
  STRATA_RETURN_IF_ERROR(env->RemoveFile(dir + "/latest"));
  return env->SyncDir(dir);
}

namespace {

struct ManifestFile {
  std::string name;
  uint64_t bytes = 0;
  std::string xxh3;
};

// The manifest's scalars and file list, checked against its own checksum
// and `plan`'s parameter groups. Throws nlohmann's exceptions for a field
// missing or of the wrong type (the caller reports them).
Status ReadManifest(const nlohmann::ordered_json& j, const Plan& plan, CheckpointScalars& sc,
                    std::vector<ManifestFile>& files) {
  auto bad = [](const std::string& why) { return Status::InvalidArgument(why); };
  if (!j.contains("manifest_xxh3")) return bad("it has no checksum of its own (manifest_xxh3)");
  if (const std::string sum = ManifestSum(j); j.at("manifest_xxh3").get<std::string>() != sum)
    return Status::IOError("it is damaged or was edited: its content has XXH3 " + sum + ", its manifest_xxh3 says " +
                           j.at("manifest_xxh3").get<std::string>());
  sc.global_steps = j.at("global_steps").get<int>();
  sc.adam_steps = j.at("adam_steps").get<int64_t>();
  sc.loss_scale = j.at("loss_scaler").at("cur_scale").get<float>();
  sc.good_steps = j.at("loss_scaler").at("good_steps").get<int>();
  sc.skipped_steps = j.at("skipped_steps").get<int>();
  sc.losses = j.at("losses").get<std::vector<double>>();
  sc.loss_scales = j.at("loss_scales").get<std::vector<double>>();
  sc.step_skipped = j.at("step_skipped").get<std::vector<bool>>();
  if (sc.global_steps < 0 || sc.adam_steps < 0 || sc.adam_steps > sc.global_steps || sc.skipped_steps < 0 ||
      sc.skipped_steps > sc.global_steps || sc.good_steps < 0 || !std::isfinite(sc.loss_scale) || sc.loss_scale <= 0)
    return bad("its step counters or loss scale are out of range (global_steps " + std::to_string(sc.global_steps) +
               ", adam_steps " + std::to_string(sc.adam_steps) + ", skipped_steps " + std::to_string(sc.skipped_steps) +
               ", good_steps " + std::to_string(sc.good_steps) + ")");
  if (static_cast<int>(sc.losses.size()) != sc.global_steps || sc.loss_scales.size() != sc.losses.size() ||
      sc.step_skipped.size() != sc.losses.size())
    return bad("the per-step histories do not have global_steps entries");
  const auto& groups = j.at("param_groups");
  if (groups.size() != plan.param_groups.size())
    return bad("it has " + std::to_string(groups.size()) + " parameter groups, this model " +
               std::to_string(plan.param_groups.size()) + ": a checkpoint of another model");
  for (size_t g = 0; g < groups.size(); ++g) {
    const PlanParamGroup& pg = plan.param_groups[g];
    const std::string name = groups[g].at("name").get<std::string>();
    const int64_t elements = groups[g].at("elements").get<int64_t>();
    if (name != pg.name || elements != pg.elements.v)
      return bad("parameter group " + std::to_string(g) + " is '" + name + "' of " + std::to_string(elements) +
                 " elements, this model's '" + pg.name + "' of " + std::to_string(pg.elements.v) +
                 ": a checkpoint of another model");
  }
  for (const auto& fj : j.at("files")) {
    files.push_back(
        {fj.at("name").get<std::string>(), fj.at("bytes").get<uint64_t>(), fj.at("xxh3").get<std::string>()});
    if (!PlainName(files.back().name))
      return bad("a file name that is not a name in its directory: '" + files.back().name + "'");
  }
  if (files.size() != static_cast<size_t>(j.at("world_size").get<int64_t>()))
    return bad("it lists " + std::to_string(files.size()) + " rank files for a world of " +
               std::to_string(j.at("world_size").get<int64_t>()));
  return Status::Ok();
}

// A rank file's segments, each checked to lie in its parameter group,
// their count and total bounded by the file's size; `p` left at the values.
Status ReadSegments(const std::string& data, const Plan& plan, const std::string& path, std::vector<StateSegment>& segs,
                    int64_t& values, const char*& p) {
  p = data.data();
  const char* end = p + data.size();
  uint32_t head[2];
  if (data.size() < sizeof kMagic + sizeof head || std::memcmp(p, kMagic, sizeof kMagic) != 0)
    return Status::IOError("'" + path + "' is not a Strata optimizer-state file");
  std::memcpy(head, p + sizeof kMagic, sizeof head);
  p += sizeof kMagic + sizeof head;
  if (head[0] != kVersion) return Status::IOError("'" + path + "': format version " + std::to_string(head[0]));
  constexpr size_t kRecord = 3 * sizeof(int64_t);
  if (head[1] > static_cast<size_t>(end - p) / kRecord)
    return Status::IOError("'" + path + "' claims " + std::to_string(head[1]) + " segments, more than its " +
                           std::to_string(data.size()) + " bytes hold");
  segs.resize(head[1]);
  values = 0;
  for (StateSegment& s : segs) {
    int64_t rec[3];
    std::memcpy(rec, p, sizeof rec);
    p += sizeof rec;
    const int64_t g = rec[0];
    if (g < 0 || g >= static_cast<int64_t>(plan.param_groups.size()) || rec[1] < 0 || rec[2] < 0 ||
        rec[1] > plan.param_groups[static_cast<size_t>(g)].elements.v ||
        rec[2] > plan.param_groups[static_cast<size_t>(g)].elements.v - rec[1])
      return Status::IOError("'" + path + "': a segment outside its parameter group (group " + std::to_string(g) +
                             ", elements " + std::to_string(rec[1]) + " + " + std::to_string(rec[2]) + ")");
    s = {static_cast<int>(g), rec[1], rec[2]};
    values += s.count;  // at most the plan's elements per segment, segments at most size / 24
    if (values > (end - p) / static_cast<int64_t>(3 * sizeof(float)))
      return Status::IOError("'" + path + "': its segments hold more values than its " + std::to_string(data.size()) +
                             " bytes");
  }
  if (end - p != static_cast<ptrdiff_t>(3 * values * sizeof(float)))
    return Status::IOError("'" + path + "' has " + std::to_string(end - p) + " bytes of state for " +
                           std::to_string(values) + " values of three arrays");
  return Status::Ok();
}

// The most bytes a rank file of `plan` can hold: every element's three
// values once, and a record per segment (a segment per group and rank).
uint64_t RankFileLimit(const Plan& plan) {
  uint64_t elements = 0;
  for (const PlanParamGroup& g : plan.param_groups) elements += static_cast<uint64_t>(g.elements.v);
  const uint64_t segments = plan.param_groups.size() * static_cast<uint64_t>(std::max(plan.world_size, 1));
  return sizeof kMagic + 8 + 24 * segments + 12 * elements;
}

}  // namespace

Result<LoadedCheckpoint> LoadCheckpoint(Env* env, const std::string& dir, const Plan& plan,
                                        const std::vector<StateSegment>& want) {
  auto latest = LatestTag(env, dir);
  if (!latest.ok())
    return Status::InvalidArgument("no checkpoint to resume in '" + dir + "': " + latest.status().message());
  const std::string tag = *latest;
  if (!PlainName(tag))
    return Status::InvalidArgument("'" + dir + "/latest' names '" + tag + "', not a checkpoint in that directory");
  LoadedCheckpoint out;
  out.path = dir + "/" + tag;
  const std::string mpath = out.path + "/" + kManifest;
  STRATA_ASSIGN_OR_RETURN(auto text, ReadAll(env, mpath, kManifestLimit));
  auto j = nlohmann::ordered_json::parse(text, nullptr, false);
  auto bad = [&](const Status& why) {
    const std::string m = "checkpoint manifest '" + mpath + "': " + why.message();
    return why.code() == Status::Code::kIOError ? Status::IOError(m) : Status::InvalidArgument(m);
  };
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != "strata-checkpoint-1")
    return bad(Status::InvalidArgument("not a Strata checkpoint manifest (format strata-checkpoint-1)"));
  try {
    std::vector<ManifestFile> files;
    if (Status st = ReadManifest(j, plan, out.scalars, files); !st.ok()) return bad(st);
    for (const PlanParamGroup& pg : plan.param_groups)
      out.master.emplace_back(static_cast<size_t>(pg.elements.v), 0.0f);
    // Wanted moment segments, at their offsets in the output.
    size_t total = 0;
    std::vector<size_t> at;
    for (const StateSegment& w : want) at.push_back(total), total += static_cast<size_t>(w.count);
    out.exp_avg.assign(total, 0.0f);
    out.exp_avg_sq.assign(total, 0.0f);
    std::vector<std::vector<char>> covered(plan.param_groups.size());
    for (size_t g = 0; g < covered.size(); ++g)
      covered[g].assign(static_cast<size_t>(plan.param_groups[g].elements.v), 0);
    for (const ManifestFile& mf : files) {
      const std::string path = out.path + "/" + mf.name;
      STRATA_ASSIGN_OR_RETURN(auto data, ReadAll(env, path, RankFileLimit(plan), &mf.bytes));
      if (const std::string sum = Hex(XXH3_64bits(data.data(), data.size())); sum != mf.xxh3)
        return Status::IOError("checkpoint file '" + path + "' is damaged: " + std::to_string(data.size()) +
                               " bytes with XXH3 " + sum + ", the manifest says " + std::to_string(mf.bytes) +
                               " bytes with " + mf.xxh3);
      std::vector<StateSegment> segs;
      int64_t values = 0;
      const char* p = nullptr;
      STRATA_RETURN_IF_ERROR(ReadSegments(data, plan, path, segs, values, p));
      const char* arr[3];
      for (int a = 0; a < 3; ++a) arr[a] = p + a * values * static_cast<int64_t>(sizeof(float));
      int64_t off = 0;
      for (const StateSegment& s : segs) {
        std::memcpy(out.master[static_cast<size_t>(s.group)].data() + s.start, arr[0] + off * 4,
                    static_cast<size_t>(s.count) * 4);
        std::fill_n(covered[static_cast<size_t>(s.group)].begin() + s.start, s.count, 1);
        for (size_t w = 0; w < want.size(); ++w) {
          if (want[w].group != s.group) continue;
          const int64_t lo = std::max(want[w].start, s.start),
                        hi = std::min(want[w].start + want[w].count, s.start + s.count);
          if (lo >= hi) continue;
          const size_t n = static_cast<size_t>(hi - lo);
          std::memcpy(out.exp_avg.data() + at[w] + (lo - want[w].start), arr[1] + (off + lo - s.start) * 4, n * 4);
          std::memcpy(out.exp_avg_sq.data() + at[w] + (lo - want[w].start), arr[2] + (off + lo - s.start) * 4, n * 4);
        }
        off += s.count;
      }
    }
    for (size_t g = 0; g < covered.size(); ++g)
      if (std::find(covered[g].begin(), covered[g].end(), 0) != covered[g].end())
        return bad(Status::InvalidArgument("no file holds all of parameter group '" + plan.param_groups[g].name + "'"));
  } catch (const nlohmann::json::exception& e) {
    return bad(Status::InvalidArgument(std::string("a field is missing or of the wrong type: ") + e.what()));
  }
  return out;
}

}  // namespace strata::exec
