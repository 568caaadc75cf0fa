// Strata's version, recorded in every report, sweep row and trace so that
// results can be told apart (and matched to the source that made them).
#pragma once

namespace strata {

// Keep equal to project(strata VERSION ...) in the top CMakeLists.txt (the
// CLI's --version prints it; a configure-time check compares the two).
inline constexpr const char* kStrataVersion = "0.1.0";

}  // namespace strata
