// Where a test finds the checkout (scenarios, golden files) and the build
// tree (scratch files). The two paths are compiled into one small source
// (test_paths.cc) instead of every test's command line, so that a second
// clone at another path gets the compiler cache's objects for every other
// test source (docs/testing.md, "Budget").
#pragma once

namespace strata::testing {

const char* SourceDir();  // the checkout's root
const char* BinaryDir();  // the build directory's root

}  // namespace strata::testing
