// libFuzzer target: Chrome Trace Event JSON as the GUI and `strata
// validate` read it (a Strata trace, or one from elsewhere).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "strata/timeline/trace_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)strata::ReadChromeTrace(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.json");
  return 0;
}
