// Where Strata may write. The swap directory (nvme_path, --nvme-dir) and the
// checkpoint directory are the user's scratch space; a run as root must not
// scatter files into, or remove anything from, the system's own trees.
#pragma once

#include <string>
#include <string_view>

#include "strata/core/status.h"

namespace strata {

// Ok unless `path`, made absolute and with the symbolic links of its
// existing part resolved, is "/" or lies in a system tree (/bin, /boot,
// /dev but /dev/shm, /etc, /lib and its variants, /proc, /sbin, /sys,
// /usr): then InvalidArgument, "WHAT 'PATH' is a system location
// (resolves to R): ...". Nothing is created or modified.
Status CheckUserDirectory(std::string_view what, const std::string& path);

}  // namespace strata
