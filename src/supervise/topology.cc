// Sources: torchrun's flags and defaults (pytorch/pytorch torch/distributed/run.py
// get_args_parser: --nnodes "1:1", --node-rank 0, --master-addr 127.0.0.1, --master-port 29500,
// --rdzv-backend static, --rdzv-endpoint port 29400, --max-restarts 0, --standalone; every flag
// also from PET_<DEST>, torch/distributed/argparse_util.py), Slurm's output environment
// (sbatch(1), srun(1): SLURM_JOB_ID, SLURM_ARRAY_JOB_ID/SLURM_ARRAY_TASK_ID, SLURM_NODEID,
// SLURM_JOB_NUM_NODES, SLURM_JOB_NODELIST, SLURM_STEP_ID, SLURM_STEP_NUM_NODES,
// SLURM_STEP_NODELIST, SLURM_RESTART_COUNT), Kubernetes Indexed Jobs (JOB_COMPLETION_INDEX,
// kubernetes.io/docs/tasks/job/indexed-parallel-processing-static), SkyPilot
// (SKYPILOT_NODE_RANK, SKYPILOT_NUM_NODES, SKYPILOT_NODE_IPS, SKYPILOT_TASK_ID:
// skypilot docs running-jobs/distributed-jobs.rst). research/06 collects them.
#include "supervise/topology.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

namespace gpuhost::supervise {
namespace {

std::string_view base_name(std::string_view path) {
  const auto slash = path.find_last_of("/\\");
  if (slash != std::string_view::npos) path.remove_prefix(slash + 1);
  if (path.size() > 4 && path.substr(path.size() - 4) == ".exe") path.remove_suffix(4);
  return path;
}

bool is_torchrun_word(std::string_view word) {
  const std::string_view name = base_name(word);
  return name == "torchrun" || name == "torch.distributed.run" || name == "torch.distributed.launch";
}

// Where torchrun's own options begin in `command`, or nullopt when it does not run torchrun.
std::optional<std::size_t> torchrun_options_at(const std::vector<std::string>& command) {
  if (command.empty()) return std::nullopt;
  if (is_torchrun_word(command[0])) return 1;
  if (!base_name(command[0]).starts_with("python")) return std::nullopt;
  for (std::size_t i = 1; i < command.size(); ++i) {
    if (command[i] == "-m" && i + 1 < command.size())
      return is_torchrun_word(command[i + 1]) ? std::optional<std::size_t>(i + 2) : std::nullopt;
    if (command[i].starts_with('-')) continue;  // interpreter options (-u, -X dev)
    return is_torchrun_word(command[i]) ? std::optional<std::size_t>(i + 1) : std::nullopt;
  }
  return std::nullopt;
}

// torchrun options that take no value; every other option before the script takes one.
bool is_torchrun_switch(std::string_view name) {
  static const std::set<std::string_view> k_switches = {"--standalone", "--no-python", "-m", "--module",
                                                         "--run-path", "--use-env", "--virtual-local-rank"};
  return k_switches.contains(name);
}

// torchrun's options as --dashed-names → value (switches → ""), up to the training script.
std::map<std::string, std::string> torchrun_options(const std::vector<std::string>& command, std::size_t at) {
  std::map<std::string, std::string> out;
  for (std::size_t i = at; i < command.size(); ++i) {
    const std::string& word = command[i];
    if (word == "--" || !word.starts_with('-') || word == "-") break;  // the script
    std::string name = word;
    std::optional<std::string> value;
    if (const auto eq = word.find('='); eq != std::string::npos) {
      name = word.substr(0, eq);
      value = word.substr(eq + 1);
    }
    // run.py accepts --node_rank and --node-rank alike (argparse aliases of one dest).
    if (name.starts_with("--")) std::replace(name.begin() + 2, name.end(), '_', '-');
    if (!value && !is_torchrun_switch(name) && i + 1 < command.size()) value = command[++i];
    out[name] = value.value_or("");
  }
  return out;
}

Result<int> to_count(std::string_view text, std::string_view source) {
  int n = 0;
  const auto* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, n);
  if (ec != std::errc() || ptr != end || n < 0)
    return make_error(ErrorCode::invalid_argument,
                      std::string(source) + ": '" + std::string(text) + "' is not a non-negative whole number");
  return n;
}

// "host:port", "[v6]:port" or "host" → host, port.
std::pair<std::string, std::optional<int>> split_endpoint(std::string_view endpoint) {
  std::string_view host = endpoint;
  std::string_view port;
  if (endpoint.starts_with('[')) {
    const auto close = endpoint.find(']');
    if (close != std::string_view::npos) {
      host = endpoint.substr(1, close - 1);
      if (close + 1 < endpoint.size() && endpoint[close + 1] == ':') port = endpoint.substr(close + 2);
    }
  } else if (const auto colon = endpoint.rfind(':');
             colon != std::string_view::npos && endpoint.find(':') == colon) {
    host = endpoint.substr(0, colon);
    port = endpoint.substr(colon + 1);
  }
  std::optional<int> number;
  if (auto n = to_count(port, "port"); n && *n > 0 && *n < 65536) number = *n;
  return {std::string(host), number};
}

struct Reader {
  const EnvLookup& env;
  Topology& t;
  std::optional<std::string> get(std::string_view name) {
    auto v = env(name);
    if (v && v->empty()) return std::nullopt;
    return v;
  }
  // A count from the variable, recorded as evidence.
  Result<std::optional<int>> count(std::string_view name) {
    auto v = get(name);
    if (!v) return std::optional<int>();
    int n = GPUHOST_TRY(to_count(*v, name));
    t.evidence.push_back(std::string(name) + "=" + *v);
    return std::optional<int>(n);
  }
};

Result<void> read_torchrun(const std::vector<std::string>& command, Reader& r) {
  Topology& t = r.t;
  auto at = torchrun_options_at(command);
  if (!at) return {};
  t.torchrun = true;
  t.engine = "torchrun";
  auto options = torchrun_options(command, *at);
  // An option, else its PET_<DEST> variable (argparse_util.env), with where it came from.
  auto option = [&](std::string_view dashed) -> std::optional<std::pair<std::string, std::string>> {
    if (auto it = options.find(std::string(dashed)); it != options.end())
      return std::pair{it->second, "torchrun " + std::string(dashed) + "=" + it->second};
    std::string dest = "PET_";
    for (char c : dashed.substr(2)) dest += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    if (auto v = r.get(dest)) return std::pair{*v, dest + "=" + *v};
    return std::nullopt;
  };
  const bool standalone = options.contains("--standalone");
  if (standalone) t.evidence.push_back("torchrun --standalone");

  if (auto nnodes = option("--nnodes"); nnodes && !standalone) {
    const std::string& text = nnodes->first;
    const auto colon = text.find(':');
    const std::string source = nnodes->second;
    t.nnodes = GPUHOST_TRY(to_count(std::string_view(text).substr(0, colon), source));
    t.nnodes_max = colon == std::string::npos ? t.nnodes : GPUHOST_TRY(to_count(std::string_view(text).substr(colon + 1), source));
    if (t.nnodes < 1 || t.nnodes_max < t.nnodes)
      return make_error(ErrorCode::invalid_argument, source + ": needs 1 <= min <= max nodes");
    t.evidence.push_back(source);
  }
  if (auto rank = option("--node-rank")) {
    t.node_rank = GPUHOST_TRY(to_count(rank->first, rank->second));
    t.evidence.push_back(rank->second);
  }
  if (auto backend = option("--rdzv-backend")) t.rdzv_backend = backend->first;
  if (t.rdzv_backend.empty()) t.rdzv_backend = standalone ? "c10d" : "static";
  if (auto endpoint = option("--rdzv-endpoint"); endpoint && !standalone) {
    auto [host, port] = split_endpoint(endpoint->first);
    t.leader_host = host;
    t.leader_port = port.value_or(29400);
    t.evidence.push_back(endpoint->second);
  }
  if (t.leader_host.empty() || t.rdzv_backend == "static") {
    if (auto addr = option("--master-addr")) {
      t.leader_host = addr->first;
      t.evidence.push_back(addr->second);
    }
    if (auto port = option("--master-port")) t.leader_port = GPUHOST_TRY(to_count(port->first, port->second));
    if (!t.leader_port && t.nnodes_max > 1) t.leader_port = 29500;  // run.py's --master-port default
  }
  if (t.leader_host.empty() && t.nnodes_max > 1) t.leader_host = "127.0.0.1";  // torchrun's default
  if (t.rdzv_backend == "static" && t.nnodes_max > 1 && !t.node_rank) t.node_rank = 0;  // run.py default
  if (auto n = option("--nproc-per-node"); n) {
    if (auto count = to_count(n->first, n->second)) t.nproc_per_node = *count;  // "gpu", "auto": left open
  }
  if (auto restarts = option("--max-restarts")) t.torchrun_max_restarts = GPUHOST_TRY(to_count(restarts->first, restarts->second));
  return {};
}

Result<void> read_slurm(Reader& r) {
  Topology& t = r.t;
  auto job = r.get("SLURM_JOB_ID");
  if (!job) return {};
  t.engine = "slurm";
  auto array_job = r.get("SLURM_ARRAY_JOB_ID");
  auto array_task = r.get("SLURM_ARRAY_TASK_ID");
  // scontrol requeue takes an array element as JOBID_TASK (research/06 §6.4, Lightning#15022).
  t.job_key = array_job && array_task ? *array_job + "_" + *array_task : *job;
  t.evidence.push_back("SLURM_JOB_ID=" + *job);
  if (auto restarts = GPUHOST_TRY(r.count("SLURM_RESTART_COUNT"))) t.engine_restarts = *restarts;

  // Inside a step (srun: one task per node) the step's nodes are the job's nodes; the batch
  // script itself runs once, on the first node only.
  const bool in_step = r.get("SLURM_STEP_ID").has_value();
  std::optional<int> nodes = GPUHOST_TRY(r.count(in_step ? "SLURM_STEP_NUM_NODES" : "SLURM_JOB_NUM_NODES"));
  if (!nodes) nodes = GPUHOST_TRY(r.count("SLURM_NNODES"));
  auto list = r.get(in_step ? "SLURM_STEP_NODELIST" : "SLURM_JOB_NODELIST");
  if (!list) list = r.get("SLURM_NODELIST");
  if (list) t.slurm_nodes = GPUHOST_TRY(expand_slurm_hostlist(*list));
  if (!in_step) {
    if (nodes && *nodes > 1 && !t.torchrun)
      t.evidence.push_back("the batch script of a " + std::to_string(*nodes) +
                           "-node allocation: one gpuhost per node needs srun");
    return {};
  }
  std::optional<int> node_id = GPUHOST_TRY(r.count("SLURM_NODEID"));
  if (!t.torchrun || t.nnodes_max == 1) {
    if (nodes) t.nnodes = t.nnodes_max = *nodes;
    if (node_id) t.node_rank = *node_id;
  } else if (!t.node_rank && node_id) {
    t.node_rank = *node_id;  // c10d rendezvous without --node-rank: Slurm still says which node
  }
  if (t.leader_host.empty() && !t.slurm_nodes.empty() && t.nnodes_max > 1) t.leader_host = t.slurm_nodes.front();
  return {};
}

Result<void> read_kubernetes_and_skypilot(Reader& r) {
  Topology& t = r.t;
  if (auto rank = r.get("SKYPILOT_NODE_RANK")) {
    t.engine = "skypilot";
    auto nodes = GPUHOST_TRY(r.count("SKYPILOT_NUM_NODES"));
    const int node = GPUHOST_TRY(to_count(*rank, "SKYPILOT_NODE_RANK"));
    t.evidence.push_back("SKYPILOT_NODE_RANK=" + *rank);
    if (!t.torchrun || t.nnodes_max == 1) {
      if (nodes) t.nnodes = t.nnodes_max = *nodes;
      t.node_rank = node;
    }
    if (auto ips = r.get("SKYPILOT_NODE_IPS"); ips && t.leader_host.empty() && t.nnodes_max > 1)
      t.leader_host = ips->substr(0, ips->find('\n'));
    if (auto task = r.get("SKYPILOT_TASK_ID")) t.job_key = *task;
    return {};
  }
  if (!r.get("KUBERNETES_SERVICE_HOST")) return {};
  t.engine = "kubernetes";
  if (auto jobset = r.get("JOBSET_NAME")) {
    t.job_key = *jobset;
    t.evidence.push_back("JOBSET_NAME=" + *jobset);
  }
  if (auto index = GPUHOST_TRY(r.count("JOB_COMPLETION_INDEX")); index && !t.node_rank) t.node_rank = *index;
  return {};
}

}  // namespace

std::string Topology::restart_owner() const {
  if (torchrun && torchrun_max_restarts > 0)
    return "torchrun --max-restarts=" + std::to_string(torchrun_max_restarts);
  if (!multi_node()) return {};
  if (engine == "slurm") return "slurm (sbatch --requeue)";
  if (engine == "kubernetes") return "kubernetes (the Job's or JobSet's restart policy)";
  if (engine == "skypilot") return "skypilot (managed job recovery)";
  return "whoever starts the nodes (rerun every node's gpuhost)";
}

std::string Topology::describe() const {
  if (!multi_node()) return engine.empty() || engine == "torchrun" ? "single node" : "single node (" + engine + ")";
  std::string out = "node " + (node_rank ? std::to_string(*node_rank) : std::string("?")) + " of " +
                    std::to_string(nnodes) + (nnodes_max != nnodes ? ":" + std::to_string(nnodes_max) : "");
  out += " (" + engine;
  if (torchrun && engine != "torchrun") out += ", torchrun";
  if (!leader_host.empty()) {
    out += ", " + (torchrun ? rdzv_backend + " at " : std::string("leader ")) + leader_host;
    if (leader_port) out += ":" + std::to_string(*leader_port);
  }
  return out + ")";
}

Result<Topology> detect_topology(const std::vector<std::string>& command, const EnvLookup& env) {
  Topology t;
  Reader r{env, t};
  GPUHOST_TRY_VOID(read_torchrun(command, r));
  GPUHOST_TRY_VOID(read_slurm(r));
  GPUHOST_TRY_VOID(read_kubernetes_and_skypilot(r));
  if (t.node_rank && t.multi_node() && *t.node_rank >= t.nnodes_max) {
    std::string sources;
    for (const std::string& e : t.evidence) sources += (sources.empty() ? "" : ", ") + e;
    return make_error(ErrorCode::invalid_argument, "node rank " + std::to_string(*t.node_rank) + " is not below the " +
                                                       std::to_string(t.nnodes_max) + " nodes of the job (" + sources + ")");
  }
  return t;
}

Result<std::vector<std::string>> expand_slurm_hostlist(std::string_view list) {
  // Comma-separated at bracket depth 0; each item is prefix[ranges]suffix... with ranges "01-03,07".
  std::vector<std::string> out;
  auto bad = [&](std::string why) {
    return make_error(ErrorCode::invalid_argument, "Slurm host list '" + std::string(list) + "': " + why);
  };
  std::vector<std::string_view> items;
  int depth = 0;
  std::size_t begin = 0;
  for (std::size_t i = 0; i <= list.size(); ++i) {
    if (i == list.size() || (list[i] == ',' && depth == 0)) {
      if (i > begin) items.push_back(list.substr(begin, i - begin));
      begin = i + 1;
      continue;
    }
    if (list[i] == '[') ++depth;
    if (list[i] == ']' && --depth < 0) return bad("']' without '['");
  }
  if (depth != 0) return bad("'[' without ']'");
  for (std::string_view item : items) {
    std::vector<std::string> names{""};
    std::size_t i = 0;
    while (i < item.size()) {
      if (item[i] != '[') {
        const std::size_t next = std::min(item.find('[', i), item.size());
        for (auto& n : names) n += item.substr(i, next - i);
        i = next;
        continue;
      }
      const std::size_t close = item.find(']', i);
      if (close == std::string_view::npos) return bad("'[' without ']'");
      std::vector<std::string> parts;
      std::string_view ranges = item.substr(i + 1, close - i - 1);
      std::size_t at = 0;
      while (at <= ranges.size()) {
        const std::size_t comma = std::min(ranges.find(',', at), ranges.size());
        std::string_view range = ranges.substr(at, comma - at);
        const auto dash = range.find('-');
        std::string_view low = range.substr(0, dash);
        std::string_view high = dash == std::string_view::npos ? low : range.substr(dash + 1);
        auto lo = to_count(low, "host range");
        auto hi = to_count(high, "host range");
        if (low.empty() || !lo || !hi || *hi < *lo) return bad("bad range '" + std::string(range) + "'");
        if (*hi - *lo > 100000) return bad("range '" + std::string(range) + "' is too large");
        for (int n = *lo; n <= *hi; ++n) {
          std::string digits = std::to_string(n);
          if (digits.size() < low.size()) digits.insert(0, low.size() - digits.size(), '0');
          parts.push_back(digits);
        }
        at = comma + 1;
      }
      std::vector<std::string> expanded;
      for (const auto& n : names)
        for (const auto& p : parts) expanded.push_back(n + p);
      names = std::move(expanded);
      i = close + 1;
    }
    for (auto& n : names) out.push_back(std::move(n));
  }
  return out;
}

Result<void> check_topology_supported(const Topology& topology) {
#ifdef _WIN32
  if (topology.multi_node())
    return make_error(ErrorCode::unsupported,
                      "a " + std::to_string(topology.nnodes_max) +
                          "-node job on native Windows: torch.distributed there is gloo only, without NCCL, and "
                          "torchrun's elastic rendezvous needs libuv, which Windows wheels lack. gpuhost on Windows "
                          "supervises one node (several GPUs with gloo); run multi-node jobs on Linux or under WSL2");
#else
  (void)topology;
#endif
  return {};
}

}  // namespace gpuhost::supervise
