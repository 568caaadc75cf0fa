// strata scenarios: the built-in scenarios, listed (text or --json), or one
// printed as YAML.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "strata/config/scenario_loader.h"
#include "strata/core/model.h"

namespace strata::cli {
namespace {

struct ScenariosArgs {
  std::string name;
  bool json = false;
};

// One scenario's row of `strata scenarios --json`.
nlohmann::ordered_json Row(const std::string& name) {
  nlohmann::ordered_json j;
  j["name"] = "builtin:" + name;
  auto s = config::LoadScenarioFile("builtin:" + name);
  if (!s.ok()) {
    j["error"] = s.status().message();
    return j;
  }
  auto params = CountParameters(s->model);
  j["model"] = s->model.kind == ModelKind::kTransformer ? "transformer" : "mlp";
  j["parameters"] = params.ok() ? nlohmann::ordered_json(params->v) : nlohmann::ordered_json();
  j["gpus"] = s->hardware.world_size();
  j["nodes"] = s->hardware.nodes;
  j["zero_stage"] = s->zero.stage;
  j["offload_param"] = std::string(OffloadDeviceName(s->zero.offload_param.device));
  j["offload_optimizer"] = std::string(OffloadDeviceName(s->zero.offload_optimizer.device));
  j["tensor_parallel"] = std::max(1, s->parallelism.tensor);
  j["pipeline_parallel"] = std::max(1, s->parallelism.pipeline);
  return j;
}

}  // namespace

Runner AddScenarios(CLI::App& app) {
  auto a = std::make_shared<ScenariosArgs>();
  auto* cmd = app.add_subcommand("scenarios", "List the built-in scenarios, or print one's YAML");
  cmd->add_option("name", a->name, "A built-in scenario (NAME or builtin:NAME): print its YAML");
  cmd->add_flag("--json", a->json,
                "List them as JSON: name, model kind, parameters, GPUs, nodes, ZeRO stage, offload devices, "
                "tensor and pipeline degrees");
  return [a]() {
    if (!a->name.empty()) {
      std::string name = a->name;
      if (name.rfind("builtin:", 0) == 0) name = name.substr(8);
      const std::string_view text = config::BuiltinScenarioText(name);
      if (text.empty()) {
        std::cerr << "strata: no built-in scenario '" << name << "' (strata scenarios lists them)\n";
        return 2;
      }
      std::cout << text;
      return 0;
    }
    if (!a->json) {
      for (const auto& n : config::BuiltinScenarioNames()) std::cout << "builtin:" << n << "\n";
      return 0;
    }
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (const auto& n : config::BuiltinScenarioNames()) list.push_back(Row(n));
    std::cout << list.dump(2) << "\n";
    return 0;
  };
}

}  // namespace strata::cli
