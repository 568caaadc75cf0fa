#include "strata/core/status.h"

namespace strata {

std::string Status::ToString() const {
  const char* name = "Ok";
  switch (code_) {
    case Code::kOk:
      return "Ok";
    case Code::kInvalidArgument:
      name = "InvalidArgument";
      break;
    case Code::kNotFound:
      name = "NotFound";
      break;
    case Code::kIOError:
      name = "IOError";
      break;
    case Code::kInfeasible:
      name = "Infeasible";
      break;
    case Code::kInternal:
      name = "Internal";
      break;
    case Code::kCancelled:
      name = "Cancelled";
      break;
  }
  return std::string(name) + ": " + message_;
}

int Status::ExitCode() const {
  if (ok()) return 0;
  return code_ == Code::kInvalidArgument ? 2 : 1;
}

}  // namespace strata
