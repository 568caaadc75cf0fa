#include "strata/config/scenario_loader.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "sections.h"
#include "yaml_reader.h"

namespace strata::config {
namespace {

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::InvalidArgument("cannot read '" + path + "': " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Loads YAML (or JSON, which yaml-cpp reads as flow YAML) into a node; syntax
// errors go to the sink with their position.
std::optional<YAML::Node> LoadNode(std::string_view text, const std::string& file, ErrorSink& sink) {
  try {
    YAML::Node root = YAML::Load(std::string(text));
    if (!root.IsMap()) {
      sink.Error(file, root.Mark(), "expected a mapping of keys at the top level");
      return std::nullopt;
    }
    return root;
  } catch (const YAML::Exception& e) {
    sink.Error(file, e.mark, "syntax error: " + e.msg);
    return std::nullopt;
  }
}

std::string StemOf(const std::string& path) {
  auto slash = path.find_last_of("/:");
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  auto dot = base.find_last_of('.');
  return dot == std::string::npos ? base : base.substr(0, dot);
}

void ApplyDeepSpeed(const std::string& path, Scenario* s, bool* overlap_set, ErrorSink& sink) {
  auto text = ReadFile(path);
  if (!text.ok()) { sink.Error(path, YAML::Mark::null_mark(), text.status().message()); return; }
  auto root = LoadNode(*text, path, sink);
  if (!root) return;
  Section top(sink, path, *root, "", root->Mark());
  if (top.present("zero_optimization")) {
    sink.Forget("zero_optimization");
    s->zero = ZeroConfig{};
    *overlap_set = false;
    if (auto z = top.Sub("zero_optimization")) ReadZero(*z, &s->zero, overlap_set);
  }
  if (top.present("aio")) {
    sink.Forget("aio");
    s->aio = AioConfig{};
    if (auto a = top.Sub("aio")) ReadAio(*a, &s->aio);
  }
  // Every other DeepSpeed key (optimizer, fp16, train_batch_size, ...) is the
  // training script's business, not the schedule's: ignored.
}

// Sets `path` (dotted) in the tree to the scalar `value`, creating mappings.
void ApplyOverride(YAML::Node root, const std::string& path, const std::string& value) {
  YAML::Node cur = root;
  size_t pos = 0;
  for (size_t dot; (dot = path.find('.', pos)) != std::string::npos; pos = dot + 1) {
    YAML::Node child = cur[path.substr(pos, dot - pos)];
    if (!child.IsMap()) child = YAML::Node(YAML::NodeType::Map);
    cur.reset(child);
  }
  cur[path.substr(pos)] = value;
}

}  // namespace

Result<std::pair<std::string, std::vector<std::string>>> ParseSetArgument(const std::string& arg) {
  const auto eq = arg.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == arg.size())
    return Status::InvalidArgument("--set '" + arg + "': expected KEY=VALUE[,VALUE...]");
  std::vector<std::string> values;
  size_t pos = eq + 1;
  while (true) {
    const size_t comma = arg.find(',', pos);
    values.push_back(arg.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (values.back().empty()) return Status::InvalidArgument("--set '" + arg + "': empty value");
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return std::make_pair(arg.substr(0, eq), std::move(values));
}

Result<Scenario> ParseScenario(std::string_view yaml_text, const std::string& source_name,
                               const LoadOptions& options) {
  ErrorSink sink;
  Scenario s;
  s.name = StemOf(source_name);
  bool overlap_set = false;
  if (auto root = LoadNode(yaml_text, source_name, sink)) {
    for (const auto& [path, value] : options.overrides) ApplyOverride(*root, path, value);
    Section top(sink, source_name, *root, "", root->Mark());
    top.String("name", &s.name);
    if (auto m = top.Sub("model", true)) ReadModel(*m, &s.model);
    if (options.hardware_file.empty()) {
      if (auto h = top.Sub("hardware", true)) ReadHardware(*h, &s.hardware);
    } else {
      top.Ignore({"hardware"});
      auto text = ReadFile(options.hardware_file);
      if (!text.ok()) {
        sink.Error(options.hardware_file, YAML::Mark::null_mark(), text.status().message());
      } else if (auto hw = LoadNode(*text, options.hardware_file, sink)) {
        for (const auto& [path, value] : options.overrides)
          if (path.rfind("hardware.", 0) == 0) ApplyOverride(*hw, path, value);
        Section file(sink, options.hardware_file, *hw, "", hw->Mark());
        if (auto h = file.Sub("hardware", true)) ReadHardware(*h, &s.hardware);
        file.Finish();
      }
    }
    if (auto t = top.Sub("training")) ReadTraining(*t, &s.training);
    if (auto z = top.Sub("zero_optimization")) ReadZero(*z, &s.zero, &overlap_set);
    if (auto a = top.Sub("aio")) ReadAio(*a, &s.aio);
    if (auto p = top.Sub("policy")) ReadPolicy(*p, &s.policy);
    top.Finish();
  }
  if (!options.deepspeed_config.empty()) ApplyDeepSpeed(options.deepspeed_config, &s, &overlap_set, sink);
  if (!overlap_set) s.zero.overlap_comm = s.zero.stage == 3;  // DeepSpeed's default

  std::string report;
  for (const auto& e : sink.errors()) report += e + "\n";
  if (report.empty()) {
    for (const auto& issue : CheckScenario(s))
      report += sink.Locate(issue.path, source_name) + ": " + issue.path + ": " + issue.message + "\n";
  }
  if (!report.empty()) {
    report.pop_back();
    return Status::InvalidArgument(report);
  }
  return s;
}

Result<Scenario> LoadScenarioFile(const std::string& path, const LoadOptions& options) {
  constexpr std::string_view kBuiltin = "builtin:";
  if (path.rfind(kBuiltin, 0) == 0) {
    std::string name = path.substr(kBuiltin.size());
    std::string_view text = BuiltinScenarioText(name);
    if (text.empty()) {
      std::string names;
      for (const auto& n : BuiltinScenarioNames()) names += " " + n;
      return Status::InvalidArgument("no built-in scenario '" + name + "'; built-in:" + names);
    }
    return ParseScenario(text, path, options);
  }
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseScenario(*text, path, options);
}

}  // namespace strata::config
