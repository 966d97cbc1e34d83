#pragma once
// Shared by https_posix.cc and https_win32.cc only: the checks both transports make the same way.

#include <cstdint>
#include <string_view>

#include "base/error.h"
#include "platform/https_client.h"

namespace gpuhost::platform::https_detail {

// invalid_argument for a URL that is not http(s), a header name or value with CR, LF or NUL, a
// body range that does not fit in its file.
[[nodiscard]] Result<WebUrl> validate(const HttpsRequest& request);

// io_error when the answer announced a Content-Length and fewer (or more) body bytes arrived: a
// connection closed mid-body must never read as a complete object.
[[nodiscard]] Result<void> check_complete(const HttpsRequest& request, const HttpsResponse& response);

// "PUT http://host/target" for error messages (the URL holds no secret: signatures travel in
// headers).
[[nodiscard]] std::string describe(const HttpsRequest& request);

}  // namespace gpuhost::platform::https_detail
