#include "test_paths.h"

namespace strata::testing {

const char* SourceDir() { return STRATA_SOURCE_DIR; }
const char* BinaryDir() { return STRATA_BINARY_DIR; }

}  // namespace strata::testing
