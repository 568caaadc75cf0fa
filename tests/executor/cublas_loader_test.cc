// executor/cuda/cublas_loader.cc: cuBLAS is not linked but opened at the
// first call, which then reaches the library's own function. Needs the
// library, not a GPU (built where the CUDA backend is).
#include <cublas_v2.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>

namespace {

TEST(CublasLoader, TheFirstCallOpensTheLibraryAndForwardsToIt) {
  // The library's own name for a status (a string the loader does not hold).
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_NE(std::strlen(cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE)), 0u);
  void* loaded = ::dlopen(STRATA_LIBCUBLAS_SONAME, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(loaded, nullptr) << STRATA_LIBCUBLAS_SONAME << " is not loaded after the first call";
  if (loaded != nullptr) ::dlclose(loaded);
  // A null handle is refused by cuBLAS itself.
  EXPECT_NE(cublasSetStream(nullptr, nullptr), CUBLAS_STATUS_SUCCESS);
}

}  // namespace
