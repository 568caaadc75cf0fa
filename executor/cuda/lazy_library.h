// A shared library opened at the first use of one of its functions, for
// the loaders that take the linker's place (cublas_loader.cc,
// nccl_loader.cc): by its path found at configure time, then by its soname.
// Private to the CUDA backend.
#pragma once

#include <dlfcn.h>

#include <string>

namespace strata::exec::cuda_detail {

struct LazyLibrary {
  void* handle = nullptr;
  std::string error;  // why it could not be opened ("" when open)
};

// Opens `path`, else `soname` (RTLD_LOCAL: its symbols stay its own).
inline LazyLibrary OpenLibrary(const char* path, const char* soname) {
  LazyLibrary l;
  l.handle = ::dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (l.handle == nullptr) l.handle = ::dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (l.handle == nullptr) {
    const char* e = ::dlerror();
    l.error = std::string("cannot load ") + soname + ": " + (e != nullptr ? e : "unknown error");
  }
  return l;
}

// The library's definition of `name` (of type F), or null.
template <typename F>
F* SymbolOf(const LazyLibrary& l, const char* name) {
  return l.handle != nullptr ? reinterpret_cast<F*>(::dlsym(l.handle, name)) : nullptr;
}

}  // namespace strata::exec::cuda_detail
