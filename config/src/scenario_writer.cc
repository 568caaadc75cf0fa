#include "strata/config/scenario_writer.h"

#include <filesystem>

#include "yaml_reader.h"

namespace strata::config {

Result<std::string> ScenarioYaml(const std::string& path, const LoadOptions& options, const std::string& deepspeed) {
  STRATA_ASSIGN_OR_RETURN(auto text, ScenarioText(path));
  ErrorSink sink;
  auto root = LoadNode(text, path, sink);
  if (!root || !root->IsMap()) return Status::InvalidArgument(path + ": not a scenario mapping");
  for (const auto& [key, value] : options.overrides) ApplyOverride(*root, key, value);
  YAML::Node model = (*root)["model"];
  if (model && model.IsMap() && model["hf_config"])
    model["hf_config"] = std::filesystem::absolute(ResolveBeside(path, model["hf_config"].as<std::string>()))
                             .lexically_normal()
                             .string();
  if (!options.hardware_file.empty()) {
    auto hw = LoadHardwareFile(options.hardware_file, options.overrides, sink);
    if (!hw) return Status::InvalidArgument(options.hardware_file + ": cannot be read");
    (*root)["hardware"] = (*hw)["hardware"];
  }
  if (!deepspeed.empty()) {
    root->remove("zero_optimization");
    root->remove("aio");
    (*root)["deepspeed"] = deepspeed;
  }
  YAML::Emitter out;
  out << *root;
  if (!out.good()) return Status::Internal("writing the scenario's YAML: " + out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

}  // namespace strata::config
