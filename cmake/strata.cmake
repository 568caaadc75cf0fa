# Shared flags and helpers for every Strata target.

add_library(strata_flags INTERFACE)
# -ffp-contract=off: GCC fuses a*b+c into FMA in C++ by default, which makes
# vectorized kernels differ from their scalar references in the last bit.
# Where a fused multiply-add is meant (the host Linear kernels), the code
# says so (std::fma, hn::MulAdd), in the reference and in the kernel alike.
target_compile_options(strata_flags INTERFACE
  -Wall -Wextra -Wpedantic -Wno-missing-field-initializers -ffp-contract=off)

# strata_add_library(NAME DIR SOURCES...): one library per layer; the layer's
# include/ directory is its whole public API.
function(strata_add_library name dir)
  add_library(${name} STATIC ${ARGN})
  target_include_directories(${name} PUBLIC ${dir}/include)
  target_link_libraries(${name} PRIVATE strata_flags)
endfunction()

# strata_add_test(NAME SOURCES... LIBS libs...): a GoogleTest binary registered
# with CTest (one CTest entry per test case via gtest_discover_tests).
function(strata_add_test name)
  cmake_parse_arguments(T "" "" "LIBS;ENV" ${ARGN})
  add_executable(${name} ${T_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE strata_flags GTest::gtest_main ${T_LIBS})
  target_compile_definitions(${name} PRIVATE
    STRATA_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    STRATA_BINARY_DIR="${PROJECT_BINARY_DIR}")
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 PROPERTIES ENVIRONMENT "${T_ENV}")
endfunction()

# strata_add_bench(NAME SOURCES... LIBS libs...): a Google Benchmark binary.
function(strata_add_bench name)
  cmake_parse_arguments(B "" "" "LIBS" ${ARGN})
  add_executable(${name} ${B_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE strata_flags benchmark::benchmark ${B_LIBS})
endfunction()

# Links jemalloc into an executable as its allocator when STRATA_JEMALLOC
# is on and the library was found (top-level CMakeLists.txt says why).
function(strata_link_jemalloc target)
  if(STRATA_JEMALLOC AND STRATA_JEMALLOC_LIB)
    target_link_libraries(${target} PRIVATE ${STRATA_JEMALLOC_LIB})
  endif()
endfunction()
