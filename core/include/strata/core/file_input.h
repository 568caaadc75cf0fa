// Reading an input file whole, with a bound. Every file a user names
// (scenario, hardware, DeepSpeed and Hugging Face configs, traces, training
// text) is read through ReadInputFile: a device (/dev/zero) or a file far
// larger than any real input is refused before it is read, never read until
// memory runs out. docs/limits.md lists the bounds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "strata/core/status.h"

namespace strata {

// Bounds, in bytes, for each kind of input (docs/limits.md, "Input files").
inline constexpr uint64_t kConfigFileLimit = uint64_t{4} << 20;  // YAML and JSON configs
inline constexpr uint64_t kTraceFileLimit = uint64_t{2} << 30;   // Chrome-trace JSON
inline constexpr uint64_t kTextFileLimit = uint64_t{1} << 30;    // training text, plot specs

// The whole content of `path`, a regular file or a pipe (bash's <(...)) of
// at most `limit` bytes. Else InvalidArgument naming `what`, the path and
// the reason: errno's text, "not a regular file (a character device)", or
// "N bytes, over the limit of L".
Result<std::string> ReadInputFile(const std::string& path, uint64_t limit, std::string_view what);

}  // namespace strata
