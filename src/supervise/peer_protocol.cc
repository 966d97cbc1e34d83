#include "supervise/peer_protocol.h"

#include <algorithm>

#include "platform/crypto.h"

namespace gpuhost::supervise {

std::string encode_peer_message(std::string_view type, json::Value fields) {
  if (!fields.is_object()) fields = json::Value::object();
  fields["t"] = std::string(type);
  fields["v"] = k_peer_protocol_version;
  std::string line = json::dump(fields);
  line += '\n';
  return line;
}

void PeerLineReader::feed(std::string_view bytes) {
  // What the messages already taken left: dropped before the buffer grows.
  if (m_start > 0 && m_start >= m_buffer.size() / 2) {
    m_buffer.erase(0, m_start);
    m_start = 0;
  }
  m_buffer.append(bytes);
}

Result<std::optional<PeerMessage>> PeerLineReader::next() {
  const std::size_t end = m_buffer.find('\n', m_start);
  if (end == std::string::npos) {
    if (m_buffer.size() - m_start > k_max_peer_line)
      return make_error(ErrorCode::parse_error, "a peer message is longer than " + std::to_string(k_max_peer_line) + " bytes");
    return std::optional<PeerMessage>();
  }
  std::string_view line(m_buffer.data() + m_start, end - m_start);
  m_start = end + 1;
  if (line.size() > k_max_peer_line)
    return make_error(ErrorCode::parse_error, "a peer message is longer than " + std::to_string(k_max_peer_line) + " bytes");
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  auto value = json::parse(line);
  if (!value) return make_error(ErrorCode::parse_error, "a peer message is not JSON: " + value.error().message);
  const json::Value* type = value->is_object() ? value->find("t") : nullptr;
  if (!type || !type->is_string()) return make_error(ErrorCode::parse_error, "a peer message has no type (\"t\")");
  const std::int64_t version = value->get_int("v", -1);
  if (version != k_peer_protocol_version)
    return make_error(ErrorCode::parse_error, "a peer speaks protocol version " + std::to_string(version) + ", this gpuhost " +
                                                  std::to_string(k_peer_protocol_version) +
                                                  ": run the same gpuhost version on every node");
  PeerMessage message;
  message.type = type->as_string();
  message.body = std::move(*value);
  return std::optional<PeerMessage>(std::move(message));
}

std::optional<std::int64_t> newest_common_step(const std::vector<std::vector<std::int64_t>>& steps) {
  if (steps.empty()) return std::nullopt;
  std::set<std::int64_t> common(steps.front().begin(), steps.front().end());
  for (std::size_t i = 1; i < steps.size() && !common.empty(); ++i) {
    std::set<std::int64_t> here(steps[i].begin(), steps[i].end());
    std::erase_if(common, [&](std::int64_t step) { return !here.contains(step); });
  }
  if (common.empty()) return std::nullopt;
  return *common.rbegin();
}

const char* storage_layout_name(StorageLayout layout) {
  return layout == StorageLayout::shared ? "shared" : "node_local";
}

std::optional<PeerLedger::Agreement> PeerLedger::hello(int node, NodeReport report) {
  if (node < 0 || node >= m_nnodes) return std::nullopt;
  if (node == 0) report.shares_storage = true;
  m_steps[node] = std::move(report);
  if (m_agreed || joined_count() < m_nnodes) return std::nullopt;
  Agreement agreement;
  agreement.storage = std::all_of(m_steps.begin(), m_steps.end(), [](const auto& entry) { return entry.second.shares_storage; })
                          ? StorageLayout::shared
                          : StorageLayout::node_local;
  auto joined = [](const std::vector<std::int64_t>& a, const std::vector<std::int64_t>& b) {
    std::vector<std::int64_t> all = a;
    all.insert(all.end(), b.begin(), b.end());
    return all;
  };
  if (agreement.storage == StorageLayout::shared) {
    // Every node sees node 0's folder: a step there that every node validated, or one node 0
    // lacks and restores into it from the job's remote copies.
    const NodeReport& leader = m_steps.at(0);
    std::vector<std::int64_t> restorable;
    for (std::int64_t step : leader.job_remote_steps)
      if (std::find(leader.steps.begin(), leader.steps.end(), step) == leader.steps.end()) restorable.push_back(step);
    std::vector<std::vector<std::int64_t>> all;
    for (const auto& [_, each] : m_steps) all.push_back(joined(each.steps, restorable));
    agreement.step = newest_common_step(all);
  } else {
    std::vector<std::vector<std::int64_t>> all;
    for (const auto& [_, each] : m_steps) all.push_back(joined(each.steps, each.remote_steps));
    agreement.step = newest_common_step(all);
  }
  m_agreed = agreement;
  return m_agreed;
}

std::optional<std::int64_t> PeerLedger::committed(int node, std::int64_t step) {
  if (node < 0 || node >= m_nnodes) return std::nullopt;
  auto& nodes = m_committed[step];
  nodes.insert(node);
  if (static_cast<int>(nodes.size()) < m_nnodes) return std::nullopt;
  if (m_global && *m_global >= step) return std::nullopt;
  m_global = step;
  // Older steps can no longer become the newest global commit.
  std::erase_if(m_committed, [&](const auto& entry) { return entry.first <= step; });
  return step;
}

std::vector<int> PeerLedger::missing(std::int64_t step) const {
  std::vector<int> nodes;
  auto found = m_committed.find(step);
  for (int node = 0; node < m_nnodes; ++node)
    if (found == m_committed.end() || !found->second.contains(node)) nodes.push_back(node);
  if (m_global && *m_global >= step) nodes.clear();
  return nodes;
}

bool peer_token_matches(std::string_view expected, std::string_view given) {
  return platform::constant_time_equal(platform::byte_view(expected), platform::byte_view(given));
}

}  // namespace gpuhost::supervise
