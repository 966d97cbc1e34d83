#pragma once
// The strict forms of notice.h's parsers, for the watcher, which must tell a valid "no notice"
// answer from a malformed one (trouble to report). Implemented in notice.cc.

#include <optional>
#include <string_view>

#include "base/error.h"
#include "supervise/notice.h"

namespace gpuhost::supervise {

// A notice, nullopt for a well-formed "nothing pending", or parse_error for anything else.
using NoticeRead = Result<std::optional<PreemptionNotice>>;

[[nodiscard]] NoticeRead read_aws_instance_action(std::string_view body);
[[nodiscard]] NoticeRead read_aws_rebalance(std::string_view body);
[[nodiscard]] NoticeRead read_azure_scheduled_events(std::string_view body,
                                                     std::chrono::system_clock::time_point now,
                                                     std::string_view vm_name);
[[nodiscard]] NoticeRead read_gcp_preempted(std::string_view body, std::chrono::system_clock::time_point now);
[[nodiscard]] NoticeRead read_alibaba_termination_time(std::string_view body);
[[nodiscard]] NoticeRead read_tencent_termination_time(std::string_view body,
                                                       std::chrono::seconds utc_offset);
// An empty body is "nothing pending" here: Volcengine does not document its no-event answer.
[[nodiscard]] NoticeRead read_volcengine_termination_time(std::string_view body,
                                                          std::chrono::seconds utc_offset);

}  // namespace gpuhost::supervise
