# The CUDA backend (executor/cuda/): STRATA_CUDA=AUTO builds it when nvcc,
# the CUDA runtime and NCCL are found, ON requires them, OFF leaves it out.
# Included from the top level: CUDA must be enabled in the directory common
# to every target that links it (../shared/PITFALLS.md has the CMake 3.25
# notes followed here: architectures before enable_language, C++17 for .cu,
# NCCL found by hand). The runtime is linked static (CUDA::cudart_static
# opens the driver at the first CUDA call), cuBLAS and NCCL are opened by
# the backend at their first call (executor/cuda/*_loader.cc): a command
# that uses no GPU loads no CUDA library.
set(STRATA_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO (when the toolkit and NCCL are found), ON or OFF")
set_property(CACHE STRATA_CUDA PROPERTY STRINGS AUTO ON OFF)
set(STRATA_HAVE_CUDA OFF)
if(NOT STRATA_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)  # the toolkit's standard place, off PATH
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 80 90)  # A100, H100
    endif()
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    set(CMAKE_CUDA_RUNTIME_LIBRARY Static)
    if(CCACHE_PROGRAM)
      set(CMAKE_CUDA_COMPILER_LAUNCHER ${CCACHE_PROGRAM})
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit)
    find_library(STRATA_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
    find_path(STRATA_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
    if(CUDAToolkit_FOUND AND STRATA_NCCL_LIBRARY AND STRATA_NCCL_INCLUDE_DIR)
      set(STRATA_HAVE_CUDA ON)
      # Its header only: nccl_loader.cc opens the library.
      add_library(strata_nccl INTERFACE IMPORTED)
      set_target_properties(strata_nccl PROPERTIES INTERFACE_INCLUDE_DIRECTORIES ${STRATA_NCCL_INCLUDE_DIR})
    endif()
  endif()
  if(STRATA_CUDA STREQUAL "ON" AND NOT STRATA_HAVE_CUDA)
    message(FATAL_ERROR "STRATA_CUDA=ON, but nvcc, the CUDA runtime or NCCL was not found")
  endif()
endif()
message(STATUS "CUDA backend: ${STRATA_HAVE_CUDA} (STRATA_CUDA=${STRATA_CUDA})")
