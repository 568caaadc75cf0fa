// The hostile-input corpus (tests/hostile/): inputs an adversarial user
// wrote, each refused with a clear message (exit 2) instead of a crash, a
// hang, an allocation of gigabytes or a silently wrong result. Each file's
// expected message is in tests/hostile/expected.tsv; the fuzz job seeds its
// targets with the same files (scripts/sanitize.sh).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "strata/config/scenario_loader.h"
#include "strata/core/file_input.h"
#include "strata/plan/plan_json.h"
#include "strata/plan/validator.h"
#include "strata/timeline/trace_io.h"
#include "test_paths.h"

namespace strata {
namespace {

using config::LoadOptions;
using config::LoadScenarioFile;
using config::ParseScenario;

const std::string kDir = std::string(testing::SourceDir()) + "/tests/hostile/";

// A scenario every DeepSpeed or Hugging Face config of the corpus is read beside.
std::string Minimal(const std::string& model) {
  return "name: hostile\nmodel: " + model +
         "\nhardware:\n  gpu: {memory: 16GiB, peak_flops: 100TFLOPS}\n  cpu: {memory: 64GiB}\n";
}

// Loads `rel` (kind/name) as its kind is read: the status it ends with.
Status Load(const std::string& rel) {
  const std::string path = kDir + rel;
  const std::string kind = rel.substr(0, rel.find('/'));
  if (kind == "scenario") return LoadScenarioFile(path).status();
  if (kind == "deepspeed") {
    LoadOptions o;
    o.deepspeed_config = path;
    return ParseScenario(Minimal("{kind: transformer, layers: 2, hidden_size: 64, num_heads: 4}"), "s.yaml", o)
        .status();
  }
  if (kind == "hf") return ParseScenario(Minimal("{kind: transformer, hf_config: " + path + "}"), "s.yaml").status();
  if (kind == "trace") return ReadChromeTraceFile(path).status();
  if (kind == "plan") {
    STRATA_ASSIGN_OR_RETURN(auto text, ReadInputFile(path, kConfigFileLimit, "the plan"));
    STRATA_ASSIGN_OR_RETURN(auto plan, DecodePlan(text));
    const ValidationReport report = ValidatePlan(plan, 1);
    return report.ok() ? Status::Ok() : Status::InvalidArgument(report.violations.front().message);
  }
  return Status::Internal("no loader for '" + kind + "'");
}

std::map<std::string, std::string> Expected() {
  std::map<std::string, std::string> out;
  std::ifstream in(kDir + "expected.tsv");
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    if (tab != std::string::npos) out[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return out;
}

TEST(HostileInputs, EachIsRefusedWithItsMessage) {
  const auto expected = Expected();
  ASSERT_FALSE(expected.empty()) << kDir << "expected.tsv";
  int files = 0;
  for (const auto& kind : std::filesystem::directory_iterator(kDir)) {
    if (!kind.is_directory()) continue;
    for (const auto& f : std::filesystem::directory_iterator(kind.path())) {
      const std::string rel = kind.path().filename().string() + "/" + f.path().filename().string();
      ++files;
      auto it = expected.find(rel);
      if (it == expected.end()) {
        ADD_FAILURE() << rel << " has no line in tests/hostile/expected.tsv";
        continue;
      }
      const Status st = Load(rel);
      EXPECT_FALSE(st.ok()) << rel << " was accepted";
      EXPECT_EQ(st.ExitCode(), 2) << rel << ": " << st.message();
      EXPECT_NE(st.message().find(it->second), std::string::npos)
          << rel << ": expected '" << it->second << "' in: " << st.message();
    }
  }
  EXPECT_EQ(files, static_cast<int>(expected.size())) << "expected.tsv names files that are not in tests/hostile/";
}

}  // namespace
}  // namespace strata
