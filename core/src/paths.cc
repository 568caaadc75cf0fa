#include "strata/core/paths.h"

#include <filesystem>
#include <system_error>

namespace strata {

namespace {
const char* const kSystem[] = {"/bin",    "/boot", "/dev",  "/etc", "/lib", "/lib32", "/lib64",
                               "/libx32", "/proc", "/sbin", "/sys", "/usr", nullptr};

bool Under(const std::string& path, const std::string& top) {
  return path == top || (path.size() > top.size() && path.compare(0, top.size(), top) == 0 && path[top.size()] == '/');
}
}  // namespace

Status CheckUserDirectory(std::string_view what, const std::string& path) {
  if (path.empty()) return Status::Ok();
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) return Status::Ok();  // the directory's own creation reports what is wrong with it
  // weakly_canonical resolves the links of the part that exists: a link in
  // /tmp to /etc is /etc.
  const fs::path real = fs::weakly_canonical(p, ec);
  std::string stripped = (ec ? p.lexically_normal() : real).string();
  while (stripped.size() > 1 && stripped.back() == '/') stripped.pop_back();
  bool system = stripped == "/";
  for (const char* const* d = kSystem; !system && *d != nullptr; ++d) system = Under(stripped, *d);
  if (Under(stripped, "/dev/shm")) system = false;  // shared memory is scratch space (swap files in RAM)
  if (!system) return Status::Ok();
  return Status::InvalidArgument(std::string(what) + " '" + path + "' is a system location" +
                                 (stripped == path ? std::string() : " (resolves to " + stripped + ")") +
                                 ": Strata writes and removes files there; give a directory of your own");
}

}  // namespace strata
