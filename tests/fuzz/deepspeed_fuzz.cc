// libFuzzer target: a DeepSpeed JSON config applied to the seed scenario,
// as `--deepspeed FILE` does (the loader reads it from a file, so the input
// is written to one first).
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "strata/config/scenario_loader.h"
#include "strata/planner/estimator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/strata_deepspeed_fuzz_" + std::to_string(::getpid()) + ".json";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return 0;
  std::fwrite(data, 1, size, f);
  std::fclose(f);
  strata::config::LoadOptions o;
  o.deepspeed_config = path;
  auto s = strata::config::LoadScenarioFile(strata::config::kDefaultScenario, o);
  if (s.ok()) (void)strata::EstimateMemory(*s);
  return 0;
}
