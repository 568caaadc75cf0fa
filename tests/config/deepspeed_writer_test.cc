// config/deepspeed_writer.h: a scenario's settings written as a DeepSpeed
// config and read back with --deepspeed plan the same iteration.
#include "strata/config/deepspeed_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "strata/config/scenario_loader.h"
#include "strata/config/scenario_writer.h"
#include "strata/plan/plan_wire.h"
#include "strata/planner/planner.h"

namespace strata::config {
namespace {

using Overrides = std::vector<std::pair<std::string, std::string>>;

// The plan of `name` with `set`, and of the same with its own settings
// given back as a DeepSpeed config (wire bytes); warnings of the second
// load in *warnings.
std::pair<std::string, std::string> BothPlans(const std::string& name, const Overrides& set,
                                              std::vector<std::string>* warnings) {
  LoadOptions plain;
  plain.overrides = set;
  auto s = LoadScenarioFile("builtin:" + name, plain);
  if (!s.ok()) return {"load: " + s.status().message(), ""};
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("strata-ds-writer-" + std::to_string(::getpid()) + "-" + name + ".json"))
                               .string();
  std::ofstream(path) << DeepSpeedConfigJson(*s);
  LoadOptions with = plain;
  with.deepspeed_config = path;
  with.warnings = warnings;
  auto t = LoadScenarioFile("builtin:" + name, with);
  std::filesystem::remove(path);
  if (!t.ok()) return {"", "reload: " + t.status().message()};
  auto a = BuildPlan(*s), b = BuildPlan(*t);
  return {a.ok() ? EncodePlanWire(*a) : a.status().message(), b.ok() ? EncodePlanWire(*b) : b.status().message()};
}

TEST(DeepSpeedWriter, EveryShippedScenarioPlansTheSameFromItsOwnConfig) {
  for (const std::string& name : BuiltinScenarioNames()) {
    std::vector<std::string> warnings;
    const auto [a, b] = BothPlans(name, {}, &warnings);
    EXPECT_TRUE(a == b) << name << ": the plans differ";
    // Every key written is one Strata reads: no warning but the notice
    // that the config replaces the scenario's own sections.
    for (const std::string& w : warnings)
      EXPECT_NE(w.find("is replaced by the DeepSpeed config's"), std::string::npos) << name << ": " << w;
  }
}

// Points a tuner produces: other stages, devices, buffers, batch and
// checkpointing, precision.
TEST(DeepSpeedWriter, TunedPointsPlanTheSameFromTheirConfig) {
  const std::vector<Overrides> points = {
      {{"zero_optimization.stage", "2"},
       {"zero_optimization.offload_param.device", "none"},
       {"zero_optimization.offload_optimizer.device", "cpu"}},
      {{"zero_optimization.offload_param.buffer_count", "8"},
       {"zero_optimization.stage3_prefetch_bucket_size", "200000000"},
       {"aio.queue_depth", "32"},
       {"aio.block_size", "4194304"}},
      {{"training.micro_batch_size", "2"},
       {"training.gradient_accumulation_steps", "4"},
       {"training.activation_checkpointing", "true"},
       {"training.cpu_checkpointing", "true"}},
      {{"training.precision", "bf16"},
       {"zero_optimization.stage", "0"},
       {"zero_optimization.offload_param.device", "none"},
       {"zero_optimization.offload_optimizer.device", "none"}},
  };
  for (const auto& set : points) {
    std::vector<std::string> warnings;
    const auto [a, b] = BothPlans("seed", set, &warnings);
    EXPECT_TRUE(a == b) << set.front().first << "=" << set.front().second << ": the plans differ";
    EXPECT_FALSE(a.empty());
  }
}

// strata tune -o: the scenario with a point's settings as YAML beside its
// DeepSpeed config, loaded from that directory, plans as the scenario with
// the settings given by --set does.
TEST(ScenarioWriter, TheWrittenScenarioAndConfigPlanAsTheSettingsDo) {
  const Overrides set = {{"zero_optimization.offload_param.buffer_count", "8"},
                         {"training.micro_batch_size", "2"},
                         {"training.gradient_accumulation_steps", "2"}};
  const auto dir = std::filesystem::temp_directory_path() / ("strata-scenario-writer-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const std::string name : {"seed", "gpt-tiny", "llama-70b-8xa100"}) {
    LoadOptions o;
    o.overrides = set;
    auto s = LoadScenarioFile("builtin:" + name, o);
    ASSERT_TRUE(s.ok()) << s.status().message();
    std::ofstream(dir / "ds_config.json") << DeepSpeedConfigJson(*s);
    auto yaml = ScenarioYaml("builtin:" + name, o, "ds_config.json");
    ASSERT_TRUE(yaml.ok()) << yaml.status().message();
    std::ofstream(dir / "scenario.yaml") << *yaml;
    auto t = LoadScenarioFile((dir / "scenario.yaml").string());
    ASSERT_TRUE(t.ok()) << name << ": " << t.status().message() << "\n" << *yaml;
    auto a = BuildPlan(*s), b = BuildPlan(*t);
    ASSERT_TRUE(a.ok() && b.ok()) << name;
    EXPECT_TRUE(EncodePlanWire(*a) == EncodePlanWire(*b)) << name << ": the plans differ";
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace strata::config
