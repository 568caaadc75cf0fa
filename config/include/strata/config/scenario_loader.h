// Loading scenarios: the one place where YAML (and DeepSpeed's JSON) becomes
// a strata::Scenario. Nothing above this layer sees YAML.
//
// Errors are InvalidArgument statuses whose message has one line per problem,
// each "file:line:column: message" naming the key (1-based line and column).
// Every problem found is reported, not just the first.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/core/scenario.h"
#include "strata/core/status.h"

namespace strata::config {

struct LoadOptions {
  // A DeepSpeed JSON config (or the scenario's `deepspeed:` key, relative to
  // its file): its batch keys, fp16/bf16, activation_checkpointing and
  // optimizer.type set the training section, its "zero_optimization" and
  // "aio" sections replace the scenario's (DeepSpeed's defaults fill keys it
  // leaves out); the Hugging Face Trainer's "auto" is filled from the
  // scenario where it can be. See config/src/deepspeed_config.h.
  std::string deepspeed_config;
  // When set, receives one warning listing the keys that were accepted but
  // change nothing Strata models (DeepSpeed knobs), each with the reason.
  std::vector<std::string>* warnings = nullptr;
  // A YAML file whose "hardware" section replaces the scenario's (what
  // `strata calibrate` writes).
  std::string hardware_file;
  // Settings applied on top of the file, by dotted key path
  // ("hardware.pcie.bandwidth" -> "32GB/s"), as if written in the YAML.
  std::vector<std::pair<std::string, std::string>> overrides;
};

// Splits "KEY=V1,V2,..." (a --set argument) into the key and its values. A
// value "A:B:STEP" or "A:B:*FACTOR" is a range (A, B and STEP in the same
// unit): "2GB/s:8GB/s:2GB/s" gives 2GB/s, 4GB/s, 6GB/s, 8GB/s.
Result<std::pair<std::string, std::vector<std::string>>> ParseSetArgument(const std::string& arg);
// A --set value as a number in base units (bytes, bytes/s, FLOP/s, seconds
// or a plain count): "12GB/s" -> 1.2e10; nullopt for words ("nvme").
std::optional<double> SetValueNumber(const std::string& value);

// The text of a scenario file, or of an embedded scenario for a name
// starting with "builtin:" (see BuiltinScenarioNames()).
Result<std::string> ScenarioText(const std::string& path);

// Reads and checks a scenario file. A name starting with "builtin:" loads an
// embedded scenario (see BuiltinScenarioNames()).
Result<Scenario> LoadScenarioFile(const std::string& path, const LoadOptions& options = {});

// Parses scenario text; `source_name` is used in error locations.
Result<Scenario> ParseScenario(std::string_view yaml_text, const std::string& source_name,
                               const LoadOptions& options = {});

// Scenarios compiled into the binary ("seed" is the default main job).
std::vector<std::string> BuiltinScenarioNames();
// REQUIRES: name is one of BuiltinScenarioNames(); returns empty text otherwise.
std::string_view BuiltinScenarioText(std::string_view name);
inline constexpr const char* kDefaultScenario = "builtin:seed";

}  // namespace strata::config
