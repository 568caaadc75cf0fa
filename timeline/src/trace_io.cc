#include "strata/timeline/trace_io.h"

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <unordered_map>

namespace strata {
namespace {

// Times go out as whole nanoseconds, rounded once per instant: an op's
// duration is end_ns - start_ns, so slices that touch in seconds touch in
// the trace too (rounding ts and dur separately overlapped them by 1 ns).
int64_t Ns(double seconds) { return std::llround(seconds * 1e9); }
// Microseconds with nanosecond resolution, fixed format for determinism.
std::string UsOfNs(int64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%" PRId64 ".%03" PRId64, ns / 1000, ns % 1000);
  return buf;
}
std::string Us(double seconds) { return UsOfNs(Ns(seconds)); }
std::string Num(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
// JSON string escaping for the few characters op names may hold.
std::string Quote(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
      continue;
    }
    o += c;
  }
  return o + "\"";
}

// A memory point as two counters: bytes per state kind ("<tier> memory",
// stacked) and the tier's total ("<tier> memory total", one track).
void Counter(std::ostream& out, const std::string& name, int pid, const MemoryPoint& p) {
  out << ",\n{\"name\":\"" << name << "\",\"ph\":\"C\",\"ts\":" << Us(p.t) << ",\"pid\":" << pid << ",\"args\":{";
  for (int k = 0; k < kNumStateKinds; ++k)
    out << (k ? "," : "") << '"' << StateKindName(static_cast<StateKind>(k)) << "\":" << p.by_kind[k].v;
  out << "}}";
  out << ",\n{\"name\":\"" << name << " total\",\"ph\":\"C\",\"ts\":" << Us(p.t) << ",\"pid\":" << pid
      << ",\"args\":{\"bytes\":" << p.total().v << "}}";
}

Status WriteWith(const std::string& path, void (*fn)(const Timeline&, std::ostream&), const Timeline& t) {
  std::ofstream out(path, std::ios::binary);
  if (!out) return Status::IOError("cannot write '" + path + "': " + std::strerror(errno));
  fn(t, out);
  out.close();
  if (!out) return Status::IOError("error writing '" + path + "': " + std::strerror(errno));
  return Status::Ok();
}

}  // namespace

void WriteChromeTrace(const Timeline& t, std::ostream& out) {
  out << "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"format\":\"strata.trace\",\"version\":1,\"source\":"
      << Quote(t.source) << ",\"scenario\":" << Quote(t.scenario) << ",\"world_size\":" << t.world_size
      << ",\"nodes\":" << t.nodes << ",\"gpus_per_node\":" << t.gpus_per_node
      << (t.pipeline > 1 ? ",\"pipeline\":" + std::to_string(t.pipeline) : std::string())
      << ",\"iteration_s\":" << Num(t.iteration_s) << ",\"model_flops\":" << Num(t.model_flops)
      << ",\"samples_per_iteration\":" << t.samples_per_iteration << ",\"capacity_bytes\":{";
  for (Tier tier : kAllTiers)
    out << (tier == Tier::kGpu ? "" : ",") << '"' << TierName(tier) << "\":" << t.capacity[static_cast<int>(tier)].v;
  out << "}";
  if (!t.strata_version.empty()) out << ",\"strata_version\":" << Quote(t.strata_version);
  if (!t.scenario_path.empty()) out << ",\"scenario_path\":" << Quote(t.scenario_path);
  if (!t.notes.empty()) {
    out << ",\"notes\":[";
    for (size_t i = 0; i < t.notes.size(); ++i) out << (i ? "," : "") << Quote(t.notes[i]);
    out << "]";
  }
  if (!t.overrides.empty()) {
    out << ",\"overrides\":{";
    for (size_t i = 0; i < t.overrides.size(); ++i)
      out << (i ? "," : "") << Quote(t.overrides[i].first) << ":" << Quote(t.overrides[i].second);
    out << "}";
  }
  if (!t.critical_path.empty()) {
    out << ",\"critical_rank\":" << t.critical_rank << ",\"critical_path\":[";
    for (size_t i = 0; i < t.critical_path.size(); ++i) out << (i ? "," : "") << t.critical_path[i];
    out << "]";
    // Written only where the path leaves the critical rank (so a one-rank
    // path's trace is as before).
    if (std::any_of(t.critical_path_ranks.begin(), t.critical_path_ranks.end(),
                    [&](int r) { return r != t.critical_rank; })) {
      out << ",\"critical_path_ranks\":[";
      for (size_t i = 0; i < t.critical_path_ranks.size(); ++i) out << (i ? "," : "") << t.critical_path_ranks[i];
      out << "]";
    }
  }
  out << "},\n\"traceEvents\":[";
  bool first = true;
  auto sep = [&]() -> std::ostream& {
    out << (first ? "\n" : ",\n");
    first = false;
    return out;
  };
  // Metadata: names and order of processes and threads.
  int last_rank = -1;
  for (const auto& op : t.ops) {
    if (op.rank == last_rank) continue;
    last_rank = op.rank;
    sep() << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << op.rank << ",\"args\":{\"name\":\"rank " << op.rank
          << " (node " << op.rank / t.gpus_per_node << ")\"}}";
    sep() << "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":" << op.rank
          << ",\"args\":{\"sort_index\":" << op.rank << "}}";
    for (int s = 0; s < kNumStreams; ++s) {
      sep() << "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" << op.rank << ",\"tid\":" << s
            << ",\"args\":{\"name\":\"" << StreamName(static_cast<Stream>(s)) << "\"}}";
      sep() << "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":" << op.rank << ",\"tid\":" << s
            << ",\"args\":{\"sort_index\":" << s << "}}";
    }
  }
  for (const auto& s : t.memory) {
    if (s.tier == Tier::kGpu) continue;
    if (s.tier == Tier::kCpu)
      sep() << "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" << kNodePidBase + s.owner
            << ",\"args\":{\"name\":\"node " << s.owner << " memory\"}}";
  }
  // The path's spans by (rank, op): its ranks' (the critical rank's when
  // the timeline gives no ranks).
  auto path_rank = [&](size_t i) {
    return i < t.critical_path_ranks.size() ? t.critical_path_ranks[i] : t.critical_rank;
  };
  auto key = [](int rank, OpId op) { return (static_cast<int64_t>(rank) << 32) | static_cast<uint32_t>(op); };
  std::unordered_map<int64_t, const TimelineOp*> on_path;  // filled in as the spans are written
  for (size_t i = 0; i < t.critical_path.size(); ++i) on_path.emplace(key(path_rank(i), t.critical_path[i]), nullptr);
  for (const auto& op : t.ops) {
    const int64_t start = Ns(op.start_s), end = Ns(op.end_s);
    sep() << "{\"name\":" << Quote(op.name()) << ",\"cat\":\"" << OpKindName(op.kind())
          << "\",\"ph\":\"X\",\"ts\":" << UsOfNs(start) << ",\"dur\":" << UsOfNs(end - start) << ",\"pid\":" << op.rank
          << ",\"tid\":" << static_cast<int>(op.stream()) << ",\"args\":{\"op\":" << op.op
          << ",\"layer\":" << op.layer() << ",\"bytes\":" << op.bytes().v << ",\"flops\":" << Num(op.flops()) << "}}";
    if (auto it = on_path.find(key(op.rank, op.op)); it != on_path.end()) it->second = &op;
  }
  // The critical path as flow arrows (Perfetto draws them between slices):
  // each starts in an op on the path and ends at the start of the next.
  for (size_t i = 0; i + 1 < t.critical_path.size(); ++i) {
    auto a = on_path.find(key(path_rank(i), t.critical_path[i]));
    auto b = on_path.find(key(path_rank(i + 1), t.critical_path[i + 1]));
    if (a->second == nullptr || b->second == nullptr) continue;
    const TimelineOp &from = *a->second, &to = *b->second;
    sep() << "{\"name\":\"critical path\",\"cat\":\"critical_path\",\"ph\":\"s\",\"id\":" << i
          << ",\"ts\":" << Us(from.start_s) << ",\"pid\":" << from.rank
          << ",\"tid\":" << static_cast<int>(from.stream()) << "}";
    sep() << "{\"name\":\"critical path\",\"cat\":\"critical_path\",\"ph\":\"f\",\"bp\":\"e\",\"id\":" << i
          << ",\"ts\":" << Us(to.start_s) << ",\"pid\":" << to.rank << ",\"tid\":" << static_cast<int>(to.stream())
          << "}";
  }
  first = false;
  for (const auto& s : t.memory) {
    const int pid = s.tier == Tier::kGpu ? s.owner : kNodePidBase + s.owner;
    const std::string name = std::string(TierName(s.tier)) + " memory";
    for (const auto& p : s.points) Counter(out, name, pid, p);
  }
  out << "\n]}\n";
}

void WriteOpsCsv(const Timeline& t, std::ostream& out) {
  out << "rank,op,name,kind,stream,layer,start_s,end_s,bytes,flops\n";
  for (const auto& op : t.ops)
    out << op.rank << ',' << op.op << ',' << op.name() << ',' << OpKindName(op.kind()) << ',' << StreamName(op.stream())
        << ',' << op.layer() << ',' << Num(op.start_s) << ',' << Num(op.end_s) << ',' << op.bytes().v << ','
        << Num(op.flops()) << '\n';
}

void WriteMemoryCsv(const Timeline& t, std::ostream& out) {
  out << "tier,owner,t_s,total_bytes";
  for (int k = 0; k < kNumStateKinds; ++k) out << ',' << StateKindName(static_cast<StateKind>(k));
  out << '\n';
  for (const auto& s : t.memory)
    for (const auto& p : s.points) {
      out << TierName(s.tier) << ',' << s.owner << ',' << Num(p.t) << ',' << p.total().v;
      for (const Bytes& b : p.by_kind) out << ',' << b.v;
      out << '\n';
    }
}

Status WriteChromeTraceFile(const Timeline& t, const std::string& path) { return WriteWith(path, WriteChromeTrace, t); }

Status WriteCsvFiles(const Timeline& t, const std::string& path) {
  STRATA_RETURN_IF_ERROR(WriteWith(path, WriteOpsCsv, t));
  std::string mem = path;
  const auto dot = mem.rfind(".csv");
  if (dot != std::string::npos && dot + 4 == mem.size()) mem.resize(dot);
  return WriteWith(mem + ".memory.csv", WriteMemoryCsv, t);
}

}  // namespace strata
