#include "base/error.h"

namespace gpuhost {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::not_found: return "not_found";
    case ErrorCode::permission_denied: return "permission_denied";
    case ErrorCode::invalid_argument: return "invalid_argument";
    case ErrorCode::parse_error: return "parse_error";
    case ErrorCode::io_error: return "io_error";
    case ErrorCode::timeout: return "timeout";
    case ErrorCode::unavailable: return "unavailable";
    case ErrorCode::unsupported: return "unsupported";
    case ErrorCode::internal: return "internal";
  }
  return "internal";
}

}  // namespace gpuhost
