// executor/cuda/cublas_loader.cc and nccl_loader.cc: cuBLAS and NCCL are
// not linked but opened at the first call, which then reaches the
// library's own function. Needs the libraries, not a GPU (built where the
// CUDA backend is).
#include <cublas_v2.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <nccl.h>

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

// executor/cuda/nccl_loader.cc likewise: NCCL opened at the first call.
namespace {

TEST(NcclLoader, TheFirstCallOpensTheLibraryAndForwardsToIt) {
  void* before = ::dlopen(STRATA_LIBNCCL_SONAME, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_EQ(before, nullptr) << STRATA_LIBNCCL_SONAME << " is loaded before any NCCL call (linked?)";
  if (before != nullptr) ::dlclose(before);
  // The library's own text for an error (the loader holds none).
  EXPECT_STRNE(ncclGetErrorString(ncclInvalidArgument), "");
  void* loaded = ::dlopen(STRATA_LIBNCCL_SONAME, RTLD_NOW | RTLD_NOLOAD);
  EXPECT_NE(loaded, nullptr) << STRATA_LIBNCCL_SONAME << " is not loaded after the first call";
  if (loaded != nullptr) ::dlclose(loaded);
  // A null argument is refused by NCCL itself.
  EXPECT_NE(ncclGetUniqueId(nullptr), ncclSuccess);
}

}  // namespace
