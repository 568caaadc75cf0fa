#include "strata/plan/plan_json.h"

#include <cmath>

#include "plan_json_fields.h"
#include "strata/plan/op_regions.h"

namespace strata {
namespace plan_json {
namespace {

constexpr int64_t kPlanJsonVersion = 16;

Json Ids(const std::vector<int32_t>& v) { return Json(v); }

// Regions as [buffer, offset, bytes]; moves as [src, dst, accumulate] plus a
// fourth element `true` when the move widens to fp32, and a fifth, the rank,
// when the move names one (the fourth is then always written).
Json RegionJson(const Region& r) { return Json::array({r.buffer, r.offset.v, r.bytes.v}); }
Json RegionsJson(const std::vector<Region>& v) {
  Json a = Json::array();
  for (const Region& r : v) a.push_back(RegionJson(r));
  return a;
}

Json EncodeOp(const Op& op) {
  Json j;
  j["id"] = op.id;
  j["name"] = op.name;
  j["kind"] = OpKindName(op.kind);
  j["stream"] = StreamName(op.stream);
  j["phase"] = PhaseName(op.phase);
  j["micro_step"] = op.micro_step;
  j["module"] = op.module;
  j["layer"] = op.layer;
  j["flops"] = op.flops;
  j["bytes"] = op.bytes.v;
  j["elements"] = op.elements.v;
  j["group"] = op.group;
  j["deps"] = Ids(op.deps);
  j["allocs"] = Ids(op.allocs);
  j["frees"] = Ids(op.frees);
  j["reads"] = Ids(op.reads);
  j["writes"] = Ids(op.writes);
  Json moves = Json::array();
  for (const Move& m : op.moves) {
    Json mv = Json::array({RegionJson(m.src), RegionJson(m.dst), m.accumulate});
    if (m.widen || m.rank >= 0 || m.narrow) mv.push_back(m.widen);
    if (m.rank >= 0 || m.narrow) mv.push_back(m.rank);
    if (m.narrow) mv.push_back(true);
    moves.push_back(std::move(mv));
  }
  j["moves"] = std::move(moves);
  j["params"] = RegionsJson(op.params);
  j["grads"] = RegionsJson(op.grads);
  if (op.grads_store != 0) {
    Json store = Json::array();
    for (size_t k = 0; k < op.grads.size(); ++k) store.push_back(StoresGrad(op, k));
    j["grads_store"] = std::move(store);
  }
  j["flat_begin"] = op.flat_begin;
  j["master"] = RegionJson(op.master);
  j["exp_avg"] = RegionJson(op.exp_avg);
  j["exp_avg_sq"] = RegionJson(op.exp_avg_sq);
  j["grad_in"] = RegionJson(op.grad_in);
  if (op.copy_bytes.v != 0) j["copy_bytes"] = op.copy_bytes.v;
  if (op.host_seconds != 0) j["host_seconds"] = op.host_seconds;
  if (op.quant_bits != 0) j["quant_bits"] = op.quant_bits;
  if (op.coalesce) j["coalesce"] = true;
  if (op.stored != 1) j["stored"] = op.stored;
  if (op.stage != 0) j["stage"] = op.stage;
  if (op.peer_stage >= 0) j["peer_stage"] = op.peer_stage;
  if (op.operand != Operand::kNone) j["operand"] = std::string(OperandName(op.operand));
  return j;
}

std::vector<int32_t> IdList(const Json& j, const char* key, const std::string& where) {
  const Json& v = Field(j, key, where);
  if (!v.is_array()) throw DecodeError{where + "." + key + ": expected a list"};
  std::vector<int32_t> out;
  for (const auto& x : v) {
    if (!x.is_number_integer()) throw DecodeError{where + "." + key + ": expected integers"};
    out.push_back(x.get<int32_t>());
  }
  return out;
}
Region RegionOf(const Json& v, const std::string& where) {
  if (!v.is_array() || v.size() != 3 || !v[0].is_number_integer() || !v[1].is_number_integer() ||
      !v[2].is_number_integer())
    throw DecodeError{where + ": expected [buffer, offset, bytes]"};
  return Region{v[0].get<BufferId>(), Bytes(v[1].get<int64_t>()), Bytes(v[2].get<int64_t>())};
}
Region RegionField(const Json& j, const char* key, const std::string& where) {
  return RegionOf(Field(j, key, where), where + "." + key);
}
std::vector<Region> RegionList(const Json& j, const char* key, const std::string& where) {
  const Json& a = Field(j, key, where);
  if (!a.is_array()) throw DecodeError{where + "." + key + ": expected a list"};
  std::vector<Region> v;
  for (const auto& r : a) v.push_back(RegionOf(r, where + "." + key));
  return v;
}

template <typename E>
E Enum(const Json& j, const char* key, const std::string& where, bool (*parse)(std::string_view, E*)) {
  const std::string s = Str(j, key, where);
  E e{};
  if (!parse(s, &e)) throw DecodeError{where + "." + key + ": unknown value '" + s + "'"};
  return e;
}
bool ParseTierName(std::string_view s, Tier* t) {
  auto r = ParseTier(s);
  if (r) *t = *r;
  return r.has_value();
}
const Json& Array(const Json& j, const char* key) {
  const Json& v = Field(j, key, "plan");
  if (!v.is_array()) throw DecodeError{std::string("plan.") + key + ": expected a list"};
  return v;
}

// A pass's kernels: {"gemms": [[m, n, k, batch], ...], "mem_bytes",
// "launches", "elem_bytes"}.
Json EncodeKernels(const KernelWork& w) {
  Json gemms = Json::array();
  for (const Gemm& g : w.gemms) gemms.push_back({g.m, g.n, g.k, g.batch});
  return {
      {"gemms", std::move(gemms)}, {"mem_bytes", w.mem_bytes}, {"launches", w.launches}, {"elem_bytes", w.elem_bytes}};
}
KernelWork DecodeKernels(const Json& j, const std::string& where) {
  KernelWork w;
  const Json& gemms = Field(j, "gemms", where);
  if (!gemms.is_array()) throw DecodeError{where + ".gemms: expected a list"};
  for (const Json& g : gemms) {
    if (!g.is_array() || g.size() != 4) throw DecodeError{where + ".gemms: each GEMM is [m, n, k, batch]"};
    Gemm x;
    int64_t* dims[] = {&x.m, &x.n, &x.k, &x.batch};
    for (size_t d = 0; d < 4; ++d) {
      if (!g[d].is_number_integer() || g[d].get<int64_t>() < 0)
        throw DecodeError{where + ".gemms: dimensions are non-negative integers"};
      *dims[d] = g[d].get<int64_t>();
    }
    w.gemms.push_back(x);
  }
  w.mem_bytes = Num(j, "mem_bytes", where);
  w.launches = Int32(j, "launches", where);
  w.elem_bytes = Int32(j, "elem_bytes", where);
  if (w.mem_bytes < 0 || w.launches < 0 || w.elem_bytes <= 0 || w.elem_bytes > 8)
    throw DecodeError{where + ": mem_bytes and launches must be >= 0 and elem_bytes in 1..8"};
  return w;
}

// The plan's header: format and version, the world, pipeline stages, tier
// capacities and the model's totals.
void DecodeHeader(const Json& j, Plan& p) {
  if (Str(j, "format", "plan") != "strata.plan") throw DecodeError{"plan.format: not a strata plan"};
  // Version 2: parameter groups are tensors; modules list theirs and compute
  // ops carry region lists (params, grads). Version 3: parameter groups name
  // their Adam moments' regions (checkpoints). Version 4: modules carry
  // their kernels (GEMM shapes, memory-bound bytes). Version 5: pipeline
  // stages (plan "pipeline", "stage_layers", "stage_flat_partition"; ops'
  // and buffers' "stage" when not 0, ops' "peer_stage"; send and recv ops).
  // Version 6: tensor-parallel collectives name their "operand". Version 7:
  // ops carry the "copy_bytes" of their side kernels (when not 0).
  // Version 9: the run record ("run": the model, precision, aio and swap
  // directories; buffers' "nvme_dir"), the cache's "window_nvme_reads".
  // Version 10: the host stream and hook ops ("host_seconds", when not 0),
  // quantized collectives ("quant_bits", when not 0). Version 12: the
  // plan's "framework" (when fsdp) and moves' sixth field, narrow.
  // Version 13: NVMe writes' "coalesce" (when true). Version 14: the run
  // record's "compression" and NVMe ops' "stored" ratio (when not 1).
  // Version 15: the run record's "striped". Version 16: its
  // "delayed_warmup" and "delayed_grads".
  // Older plans are re-planned from their scenario, not converted.
  if (const int64_t v = Int(j, "version", "plan"); v != kPlanJsonVersion)
    throw DecodeError{"plan.version: unsupported version " + std::to_string(v) + " (this Strata reads version " +
                      std::to_string(kPlanJsonVersion) + "; plan the scenario again)"};
  p.scenario = Str(j, "scenario", "plan");
  if (j.contains("framework")) {
    const std::string f = Str(j, "framework", "plan");
    if (f != "deepspeed" && f != "fsdp")
      throw DecodeError{"plan.framework: expected deepspeed or fsdp, got '" + f + "'"};
    p.framework = f == "fsdp" ? Framework::kFsdp : Framework::kDeepSpeed;
  }
  p.world_size = Int32(j, "world_size", "plan");
  p.nodes = Int32(j, "nodes", "plan");
  p.gpus_per_node = Int32(j, "gpus_per_node", "plan");
  p.zero_stage = Int32(j, "zero_stage", "plan");
  p.micro_steps = Int32(j, "micro_steps", "plan");
  if (p.nodes < 1 || p.gpus_per_node < 1 || static_cast<int64_t>(p.nodes) * p.gpus_per_node != p.world_size)
    throw DecodeError{"plan.world_size: must be nodes x gpus_per_node, each at least 1 (world_size " +
                      std::to_string(p.world_size) + ", nodes " + std::to_string(p.nodes) + ", gpus_per_node " +
                      std::to_string(p.gpus_per_node) + ")"};
  if (j.contains("flat_partition")) p.flat_partition = Elements(Int(j, "flat_partition", "plan"));
  if (j.contains("pipeline")) {
    p.pipeline = Int32(j, "pipeline", "plan");
    if (p.pipeline < 1 || p.world_size < 1 || p.world_size % p.pipeline != 0)
      throw DecodeError{"plan.pipeline: must be >= 1 and divide world_size"};
    p.stage_layers = IdList(j, "stage_layers", "plan");
    if (p.stage_layers.size() != static_cast<size_t>(p.pipeline) + 1)
      throw DecodeError{"plan.stage_layers: expected pipeline + 1 boundaries"};
    for (const auto& e : Array(j, "stage_flat_partition")) {
      if (!e.is_number_integer()) throw DecodeError{"plan.stage_flat_partition: expected integers"};
      p.stage_flat_partition.push_back(Elements(e.get<int64_t>()));
    }
  }
  const Json& cap = Field(j, "capacity_bytes", "plan");
  for (Tier t : kAllTiers)
    p.capacity[static_cast<int>(t)] = Bytes(Int(cap, std::string(TierName(t)).c_str(), "plan.capacity_bytes"));
  if (j.contains("gpu_reserved_bytes")) {
    p.gpu_reserved = Bytes(Int(j, "gpu_reserved_bytes", "plan"));
    if (p.gpu_reserved.v < 0) throw DecodeError{"plan.gpu_reserved_bytes: must not be negative"};
  }
  const Json& model = Field(j, "model", "plan");
  p.total_params = Elements(Int(model, "total_params", "plan.model"));
  p.model_flops = Num(model, "model_flops", "plan.model");
  p.samples_per_iteration = Int(model, "samples_per_iteration", "plan.model");
  p.tokens_per_sample = Int(model, "tokens_per_sample", "plan.model");
}

void DecodeParamGroups(const Json& j, Plan& p) {
  int i = 0;
  for (const auto& g : Array(j, "param_groups")) {
    const std::string w = "plan.param_groups[" + std::to_string(i++) + "]";
    p.param_groups.push_back(
        {Str(g, "name", w), Elements(Int(g, "elements", w)), Elements(Int(g, "partition_elements", w)),
         Elements(Int(g, "flat_offset", w)), Bool(g, "persistent", w), Enum<Tier>(g, "home", w, ParseTierName),
         Bytes(Int(g, "home_offset", w)), static_cast<BufferId>(Int(g, "home_buffer", w)),
         static_cast<BufferId>(Int(g, "master_buffer", w)), Bytes(Int(g, "master_offset", w)),
         static_cast<BufferId>(Int(g, "exp_avg_buffer", w)), Bytes(Int(g, "exp_avg_offset", w)),
         static_cast<BufferId>(Int(g, "exp_avg_sq_buffer", w)), Bytes(Int(g, "exp_avg_sq_offset", w))});
  }
}

void DecodeModules(const Json& j, Plan& p) {
  int i = 0;
  for (const auto& m : Array(j, "modules")) {
    const std::string w = "plan.modules[" + std::to_string(i++) + "]";
    p.modules.push_back({Str(m, "name", w), Int32(m, "layer", w), IdList(m, "param_groups", w), Num(m, "fwd_flops", w),
                         DecodeKernels(Field(m, "fwd", w), w + ".fwd"), DecodeKernels(Field(m, "bwd", w), w + ".bwd")});
  }
}

void DecodeCache(const Json& j, Plan& p) {
  const Json& c = Field(j, "cache", "plan");
  p.cache.eviction = Str(c, "eviction", "plan.cache");
  const Json& g = Field(c, "gpu", "plan.cache");
  const Json& cpu = Field(c, "cpu", "plan.cache");
  p.cache.gpu_capacity = Bytes(Int(g, "capacity_bytes", "plan.cache.gpu"));
  p.cache.gpu_accesses = Int(g, "accesses", "plan.cache.gpu");
  p.cache.gpu_hits = Int(g, "hits", "plan.cache.gpu");
  p.cache.cpu_capacity = Bytes(Int(cpu, "capacity_bytes", "plan.cache.cpu"));
  p.cache.cpu_accesses = Int(cpu, "accesses", "plan.cache.cpu");
  p.cache.cpu_hits = Int(cpu, "hits", "plan.cache.cpu");
  const Json& f = Field(c, "fetch_bytes", "plan.cache");
  const Json& cb = Field(c, "compulsory_bytes", "plan.cache");
  p.cache.fetch_nvme_read = Bytes(Int(f, "nvme_read", "plan.cache.fetch_bytes"));
  p.cache.fetch_h2d = Bytes(Int(f, "h2d", "plan.cache.fetch_bytes"));
  p.cache.fetch_allgather = Bytes(Int(f, "allgather", "plan.cache.fetch_bytes"));
  p.cache.compulsory_nvme_read = Bytes(Int(cb, "nvme_read", "plan.cache.compulsory_bytes"));
  p.cache.compulsory_h2d = Bytes(Int(cb, "h2d", "plan.cache.compulsory_bytes"));
  p.cache.compulsory_allgather = Bytes(Int(cb, "allgather", "plan.cache.compulsory_bytes"));
  p.cache.window_nvme_reads = AtLeast64(c, "window_nvme_reads", "plan.cache", 0);
}

void DecodeGroups(const Json& j, Plan& p) {
  int i = 0;
  for (const auto& g : Array(j, "groups")) {
    const std::string w = "plan.groups[" + std::to_string(i++) + "]";
    p.groups.push_back({Str(g, "name", w), IdList(g, "ranks", w)});
    // Regular groups only (plan.h CommGroup): rank 0's, evenly spaced.
    const std::vector<int>& rs = p.groups.back().ranks;
    bool regular = !rs.empty() && rs[0] == 0;
    for (size_t k = 1; regular && k < rs.size(); ++k) regular = rs[k] - rs[k - 1] == rs[1] - rs[0] && rs[1] > rs[0];
    if (!regular) throw DecodeError{w + ".ranks: expected rank 0's group, evenly spaced from 0"};
  }
}

Buffer DecodeBuffer(const Json& b, int i) {
  const std::string w = "plan.buffers[" + std::to_string(i) + "]";
  Buffer buf;
  buf.id = static_cast<BufferId>(Int(b, "id", w));
  if (buf.id != i) throw DecodeError{w + ".id: ids must equal their index"};
  buf.name = Str(b, "name", w);
  buf.tier = Enum<Tier>(b, "tier", w, ParseTierName);
  buf.kind = Enum<StateKind>(b, "kind", w, ParseStateKind);
  buf.bytes = Bytes(Int(b, "bytes", w));
  buf.resident = Bool(b, "resident", w);
  buf.pinned = !b.contains("pinned") || Bool(b, "pinned", w);  // absent: pinned (plans before the field)
  buf.backed = !b.contains("backed") || Bool(b, "backed", w);  // absent: allocated
  buf.cleared = b.contains("cleared") && Bool(b, "cleared", w);
  if (b.contains("stage")) buf.stage = Int32(b, "stage", w);
  if (b.contains("nvme_dir")) buf.nvme_dir = AtLeast(b, "nvme_dir", w, 0);
  return buf;
}

Op DecodeOp(const Json& o, int i) {
  const std::string w = "plan.ops[" + std::to_string(i) + "]";
  Op op;
  op.id = static_cast<OpId>(Int(o, "id", w));
  if (op.id != i) throw DecodeError{w + ".id: ids must equal their index"};
  op.name = Str(o, "name", w);
  op.kind = Enum<OpKind>(o, "kind", w, ParseOpKind);
  op.stream = Enum<Stream>(o, "stream", w, ParseStream);
  op.phase = Enum<Phase>(o, "phase", w, ParsePhase);
  op.micro_step = Int32(o, "micro_step", w);
  op.module = Int32(o, "module", w);
  op.layer = Int32(o, "layer", w);
  op.flops = Num(o, "flops", w);
  op.bytes = Bytes(Int(o, "bytes", w));
  op.elements = Elements(Int(o, "elements", w));
  op.group = Int32(o, "group", w);
  op.deps = IdList(o, "deps", w);
  op.allocs = IdList(o, "allocs", w);
  op.frees = IdList(o, "frees", w);
  op.reads = IdList(o, "reads", w);
  op.writes = IdList(o, "writes", w);
  const Json& moves = Field(o, "moves", w);
  if (!moves.is_array()) throw DecodeError{w + ".moves: expected a list"};
  for (const auto& m : moves) {
    // [src, dst, accumulate, widen, rank, narrow]: the trailing ones may be
    // left out; rank -1 (every rank) only where narrow follows.
    if (!m.is_array() || m.size() < 3 || m.size() > 6 || !m[2].is_boolean() || (m.size() >= 4 && !m[3].is_boolean()) ||
        (m.size() >= 5 && (!m[4].is_number_integer() || m[4].get<int64_t>() < (m.size() == 6 ? -1 : 0))) ||
        (m.size() == 6 && !m[5].is_boolean()))
      throw DecodeError{w +
                        ".moves: expected [src, dst, accumulate], [src, dst, accumulate, widen], [src, dst, "
                        "accumulate, widen, rank] or [src, dst, accumulate, widen, rank, narrow]"};
    op.moves.push_back({RegionOf(m[0], w + ".moves"), RegionOf(m[1], w + ".moves"), m[2].get<bool>(),
                        m.size() >= 4 && m[3].get<bool>(), m.size() >= 5 ? static_cast<int>(m[4].get<int64_t>()) : -1,
                        m.size() == 6 && m[5].get<bool>()});
  }
  op.params = RegionList(o, "params", w);
  op.grads = RegionList(o, "grads", w);
  if (o.contains("grads_store")) {
    const Json& g = Field(o, "grads_store", w);
    if (!g.is_array() || g.size() != op.grads.size())
      throw DecodeError{w + ".grads_store: a list of booleans, one per gradient region"};
    for (size_t k = 0; k < g.size(); ++k) {
      if (!g[k].is_boolean()) throw DecodeError{w + ".grads_store: a list of booleans, one per gradient region"};
      if (!g[k].get<bool>()) continue;
      if (k >= 32) throw DecodeError{w + ".grads_store: only the first 32 gradient regions can be stored"};
      op.grads_store |= 1u << k;
    }
  }
  op.flat_begin = Int(o, "flat_begin", w);
  op.master = RegionField(o, "master", w);
  op.exp_avg = RegionField(o, "exp_avg", w);
  op.exp_avg_sq = RegionField(o, "exp_avg_sq", w);
  op.grad_in = RegionField(o, "grad_in", w);
  if (o.contains("copy_bytes")) {
    op.copy_bytes = Bytes(Int(o, "copy_bytes", w));
    if (op.copy_bytes.v < 0) throw DecodeError{w + ".copy_bytes: bytes, >= 0"};
  }
  if (o.contains("host_seconds")) {
    const Json& h = Field(o, "host_seconds", w);
    if (!h.is_number() || !(h.get<double>() >= 0) || !std::isfinite(h.get<double>()))
      throw DecodeError{w + ".host_seconds: seconds, >= 0"};
    op.host_seconds = h.get<double>();
  }
  if (o.contains("quant_bits")) {
    op.quant_bits = Int32(o, "quant_bits", w);
    if (op.quant_bits != 4 && op.quant_bits != 8) throw DecodeError{w + ".quant_bits: 4 or 8"};
  }
  if (o.contains("coalesce")) {
    const Json& c = Field(o, "coalesce", w);
    if (!c.is_boolean()) throw DecodeError{w + ".coalesce: true or false"};
    op.coalesce = c.get<bool>();
  }
  if (o.contains("stored")) {
    const Json& r = Field(o, "stored", w);
    if (!r.is_number() || !(r.get<double>() > 0) || !(r.get<double>() <= 1))
      throw DecodeError{w + ".stored: a ratio in (0, 1]"};
    op.stored = r.get<double>();
  }
  if (o.contains("stage")) op.stage = Int32(o, "stage", w);
  if (o.contains("peer_stage")) {
    op.peer_stage = Int32(o, "peer_stage", w);
    if (op.peer_stage < 0) throw DecodeError{w + ".peer_stage: a stage, >= 0"};
  }
  if (o.contains("operand")) {
    const std::string name = Str(o, "operand", w);
    if (!ParseOperand(name, &op.operand))
      throw DecodeError{w + ".operand: unknown '" + name + "' (input, output, input_grad, output_grad)"};
  }
  return op;
}

Plan DecodeOrThrow(const Json& j) {
  Plan p;
  DecodeHeader(j, p);
  DecodeParamGroups(j, p);
  DecodeModules(j, p);
  DecodeCache(j, p);
  DecodeGroups(j, p);
  DecodeRun(j, p);
  int i = 0;
  for (const auto& b : Array(j, "buffers")) {
    p.buffers.push_back(DecodeBuffer(b, i));
    if (p.buffers.back().nvme_dir >= static_cast<int>(p.run.nvme_dirs.size()))
      throw DecodeError{"plan.buffers[" + std::to_string(i) + "].nvme_dir: not an index of plan.run.nvme_dirs"};
    ++i;
  }
  i = 0;
  for (const auto& o : Array(j, "ops")) p.ops.push_back(DecodeOp(o, i++));
  return p;
}

}  // namespace
}  // namespace plan_json

using namespace plan_json;  // NOLINT: this file's own helpers

std::string EncodePlan(const Plan& p, bool pretty) {
  Json j;
  j["format"] = "strata.plan";
  j["version"] = kPlanJsonVersion;
  j["scenario"] = p.scenario;
  if (p.framework == Framework::kFsdp) j["framework"] = "fsdp";
  j["world_size"] = p.world_size;
  j["nodes"] = p.nodes;
  j["gpus_per_node"] = p.gpus_per_node;
  j["zero_stage"] = p.zero_stage;
  j["micro_steps"] = p.micro_steps;
  if (p.flat_partition.v > 0) j["flat_partition"] = p.flat_partition.v;
  if (p.pipeline > 1 || !p.stage_layers.empty() || !p.stage_flat_partition.empty()) {
    j["pipeline"] = p.pipeline;
    j["stage_layers"] = p.stage_layers;
    Json fp = Json::array();
    for (Elements e : p.stage_flat_partition) fp.push_back(e.v);
    j["stage_flat_partition"] = std::move(fp);
  }
  Json cap;
  for (Tier t : kAllTiers) cap[std::string(TierName(t))] = p.capacity[static_cast<int>(t)].v;
  j["capacity_bytes"] = cap;
  if (p.gpu_reserved.v > 0) j["gpu_reserved_bytes"] = p.gpu_reserved.v;
  j["model"] = {{"total_params", p.total_params.v},
                {"model_flops", p.model_flops},
                {"samples_per_iteration", p.samples_per_iteration},
                {"tokens_per_sample", p.tokens_per_sample}};
  Json groups = Json::array();
  for (const auto& g : p.param_groups)
    groups.push_back({{"name", g.name},
                      {"elements", g.elements.v},
                      {"partition_elements", g.partition_elements.v},
                      {"flat_offset", g.flat_offset.v},
                      {"persistent", g.persistent},
                      {"home", TierName(g.home)},
                      {"home_offset", g.home_offset.v},
                      {"home_buffer", g.home_buffer},
                      {"master_buffer", g.master_buffer},
                      {"master_offset", g.master_offset.v},
                      {"exp_avg_buffer", g.exp_avg_buffer},
                      {"exp_avg_offset", g.exp_avg_offset.v},
                      {"exp_avg_sq_buffer", g.exp_avg_sq_buffer},
                      {"exp_avg_sq_offset", g.exp_avg_sq_offset.v}});
  j["param_groups"] = std::move(groups);
  Json modules = Json::array();
  for (const auto& m : p.modules)
    modules.push_back({{"name", m.name},
                       {"layer", m.layer},
                       {"param_groups", Ids(m.param_groups)},
                       {"fwd_flops", m.fwd_flops},
                       {"fwd", EncodeKernels(m.fwd)},
                       {"bwd", EncodeKernels(m.bwd)}});
  j["modules"] = std::move(modules);
  const CacheStats& c = p.cache;
  j["cache"] = {
      {"eviction", c.eviction},
      {"gpu", {{"capacity_bytes", c.gpu_capacity.v}, {"accesses", c.gpu_accesses}, {"hits", c.gpu_hits}}},
      {"cpu", {{"capacity_bytes", c.cpu_capacity.v}, {"accesses", c.cpu_accesses}, {"hits", c.cpu_hits}}},
      {"fetch_bytes", {{"nvme_read", c.fetch_nvme_read.v}, {"h2d", c.fetch_h2d.v}, {"allgather", c.fetch_allgather.v}}},
      {"compulsory_bytes",
       {{"nvme_read", c.compulsory_nvme_read.v}, {"h2d", c.compulsory_h2d.v}, {"allgather", c.compulsory_allgather.v}}},
      {"window_nvme_reads", c.window_nvme_reads}};
  Json comm = Json::array();
  for (const auto& g : p.groups) comm.push_back({{"name", g.name}, {"ranks", g.ranks}});
  j["groups"] = std::move(comm);
  j["run"] = EncodeRun(p.run);
  Json buffers = Json::array();
  for (const auto& b : p.buffers) {
    buffers.push_back({{"id", b.id},
                       {"name", b.name},
                       {"tier", TierName(b.tier)},
                       {"kind", StateKindName(b.kind)},
                       {"bytes", b.bytes.v},
                       {"resident", b.resident}});
    if (!b.pinned) buffers.back()["pinned"] = false;
    if (!b.backed) buffers.back()["backed"] = false;
    if (b.cleared) buffers.back()["cleared"] = true;
    if (b.stage != 0) buffers.back()["stage"] = b.stage;
    if (b.nvme_dir >= 0) buffers.back()["nvme_dir"] = b.nvme_dir;
  }
  j["buffers"] = std::move(buffers);
  Json ops = Json::array();
  for (const auto& op : p.ops) ops.push_back(EncodeOp(op));
  j["ops"] = std::move(ops);
  return j.dump(pretty ? 1 : -1) + "\n";
}

Result<Plan> DecodePlan(std::string_view text) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument("plan: not valid JSON");
  try {
    return DecodeOrThrow(j);
  } catch (const DecodeError& e) {
    return Status::InvalidArgument(e.msg);
  } catch (const nlohmann::json::exception& e) {
    return Status::InvalidArgument(std::string("plan: ") + e.what());
  }
}

}  // namespace strata
