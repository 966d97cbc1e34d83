#include <filesystem>
#include <iostream>
#include <mutex>
#include <ostream>

#include "base/json.h"
#include "base/strings.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/gpu_claims.h"
#include "cli/gpu_share.h"
#include "cli/job_render.h"
#include "cli/jobs_dir.h"
#include "cli/memory_fraction.h"
#include "cli/mfu_basis.h"
#include "gpu/assignment.h"
#include "gpu/collector.h"
#include "platform/environment.h"
#include "platform/files.h"
#include "platform/process.h"
#include "platform/socket.h"
#include "platform/system_info.h"
#include "supervise/job.h"
#include "supervise/remote_probe.h"
#include "supervise/supervisor.h"
#include "telemetry/exporter.h"
#include "telemetry/http_server.h"

namespace gpuhost::cli {

const char k_run_help[] = R"(Usage: gpuhost run [FLAGS] -- COMMAND [ARGS...]
       gpuhost run --job-file gpuhost.toml [FLAGS] [-- COMMAND [ARGS...]]

Supervises a training command, unchanged: watches the checkpoints it writes and commits each one
only once it validates (torch.save zip, safetensors, HF Trainer checkpoint-N/, accelerate and
kohya state dirs, PyTorch DCP, or any file once stable), turns a preemption notice (AWS, Azure,
GCP, Alibaba, Tencent, Volcengine metadata; SIGTERM from Slurm or Kubernetes; console close on
Windows) into a saved checkpoint before the deadline, restarts a crashed trainer with backoff,
and always resumes from the newest checkpoint that re-validates (never "the highest number").
Every step goes to the job's journal; `gpuhost status JOB` shows it.

The trainer learns where to resume from:
  {resume}               in COMMAND, replaced by the checkpoint path; dropped with its flag
                         ("--resume {resume}") when there is none yet
  GPUHOST_RESUME_FROM    in its environment (unset when there is none)
  --preset NAME          adds the framework's own flag: hf (--resume_from_checkpoint),
                         lightning (--ckpt_path), ultralytics (resume model=PATH),
                         kohya (--resume), torchrun (--resume after the script)

Job:
  --job-file FILE        a gpuhost.toml job file (doc/job-file.md); flags override it
  --name NAME            job name (default: from the checkpoint directory; when a job of
                         that name keeps another folder's checkpoints, NAME-2, NAME-3 ...,
                         said at start). A job is its checkpoint folder: a --name that
                         belongs to another folder is refused
  --fresh                start from scratch: checkpoints already in the folder (announced
                         otherwise, and resumed from) or committed by earlier runs are not
                         resumed from
  --checkpoints PATH     where the trainer writes checkpoints (required): a directory, or
                         one file it rewrites in place (weights/last.pt)
  --workdir DIR          the trainer's working directory (default: the current one)
  --env NAME=VALUE       extra environment for the trainer (repeatable)
  --gpu LIST             the GPUs this job may use: NVML indices (0,1), GPU-<uuid>, one
                         MIG-<uuid> slice, or mig:<profile> (a free slice of that profile,
                         e.g. mig:1g.10gb: none with a process on it, none another gpuhost run
                         holds); the trainer gets CUDA_VISIBLE_DEVICES with their UUIDs (kept in
                         the job). Refused: GPUs the host lacks, two MIG slices (a CUDA process
                         sees one), every slice of the profile taken (the holders are named),
                         MIG on Windows. gpuhost mig apply makes the slices
  --gpu-memory-fraction F  the share of each GPU's memory one Python process of the job may
                         take (0.3 or 30%), for jobs that share a GPU without MIG: PyTorch
                         through a sitecustomize hook gpuhost puts first on PYTHONPATH (it
                         calls torch.cuda.set_per_process_memory_fraction when torch is
                         imported, on LOCAL_RANK's device or each visible one), JAX through
                         XLA_PYTHON_CLIENT_MEM_FRACTION; TensorFlow reads no cap from the
                         environment (TF_FORCE_GPU_ALLOW_GROWTH=true is set; it says so)
  --gpu-share time|mps[:threads=PCT,mem=SIZE]
                         this job shares its GPUs with other jobs. time: CUDA's time slicing,
                         with a warning that nothing isolates memory or faults. mps (Linux):
                         through an MPS control daemon: one that answers already
                         (CUDA_MPS_PIPE_DIRECTORY, or /tmp/nvidia-mps) is used, else gpuhost
                         starts nvidia-cuda-mps-control -d for the host's gpuhost runs and stops
                         it when the last one ends; threads= caps the share of SMs
                         (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE), mem= the memory per device
                         (CUDA_MPS_PINNED_DEVICE_MEM_LIMIT). MPS jobs share one fault domain
  --keep K               keep the newest K committed checkpoints, delete older ones
                         (default: keep all; pinned ones are always kept)
  --settle SECONDS       a checkpoint must stay unchanged this long before it is
                         validated (default 2)
  --marker NAME          also require a marker: NAME inside a checkpoint directory, or
                         FILE + NAME beside a checkpoint file (e.g. .done)
  --snapshots auto|always|never
                         copy committed single-file checkpoints into the job directory;
                         auto (default): names without a step number (last.pt)

On a notice:
  --save-request signal|file|both|none
                         how the trainer is asked to save (default signal): the save
                         signal, and/or the file named in GPUHOST_SAVE_REQUEST. The signal
                         goes only to processes that handle it (Linux: SigCgt in /proc), so
                         a trainer without a handler and launchers (torchrun, accelerate,
                         deepspeed, mpirun) are never killed by it; when none handles it,
                         the trainer's next periodic checkpoint is the save (expected from
                         its rhythm) and it is stopped at the deadline otherwise
  --save-signal SIG      default SIGUSR1 (Windows: CTRL_BREAK, sent only when given here:
                         Windows cannot tell whether a process handles it, and it kills one
                         that does not)
  --stop-signal SIG      default SIGTERM (Windows: CTRL_BREAK)
  --stop-grace SECONDS   after the stop signal, before the tree is killed (default 10; 32 under
                         torchrun, whose agent stops its workers within 30 s)
  --safety-margin SECONDS
                         stop waiting for the save this long before the deadline (default 5)
  --signal-deadline SECONDS
                         how long the engine waits after SIGTERM/SIGUSR1/SIGHUP before it
                         kills (else GPUHOST_SIGNAL_DEADLINE; default 30, Kubernetes'
                         terminationGracePeriodSeconds and Slurm's KillWait); a start-up
                         warning says when the last save took longer
  --cloud auto|none|aws|azure|gcp|alibaba|tencent|volcengine
                         whose metadata service to watch (default auto: from the host's
                         DMI data; none on other hosts)
  --metadata-endpoint URL
                         replaces http://169.254.169.254 (or the cloud's address)
  --poll-interval SECONDS
                         how often to ask it (default 5; GCP waits on a hanging GET)

Restarts:
  --max-restarts N       crash restarts before giving up (default 10)
  --backoff SECONDS      first restart delay, doubled each time (default 1)
  --max-backoff SECONDS  (default 300)
  --crash-loop N         after N quick failures in a row from the same checkpoint, mark it
                         bad and fall back to the one before (default 3; 0 disables)
  --crash-window SECONDS a failure this soon after start counts as quick (default 120)

Remote mirror (doc/remote-store.md):
  --remote URL           upload every committed checkpoint in the background to object
                         storage (s3://bucket/prefix?endpoint=...&region=..., file:///dir), the
                         manifest last; on a host with no local checkpoint, resume from the
                         newest remote one. A notice's deadline covers the save and the upload
  --encrypt SUITE        encrypt before upload: aes-256-gcm or sm4 (doc/encryption.md)
  --remote-optional      train even when the remote cannot be listed or written at start
                         (default: refuse, exit 3, before anything is created)
  --final-upload-timeout SECONDS
                         how long a finished job waits for its last uploads (default 15m);
                         checkpoints still not durable then end the run with exit 5
  --encryption-key-file FILE
                         the 256-bit key (else GPUHOST_ENCRYPTION_KEY_FILE or
                         GPUHOST_ENCRYPTION_KEY; never on the command line). Also reads an
                         encrypted remote without --encrypt

Rehearsal:
  --drill preempt@T[/D]  deliver a preemption notice T seconds after the start, with a
                         deadline D seconds later (default 30)
  --drill kill@T         kill the trainer's whole process tree at T seconds (repeatable)

Advisor (doc/advise.md):
  --advise SECONDS|off   judge what limits the trainer this often (default 60): NVML and the
                         trainer's threads over the window, as gpuhost advise does; journalled
                         when the findings or the step time change, shown by gpuhost status,
                         the dashboard and /metrics (gpuhost_job_finding), with the step time
                         against the last run's
  --model NAME|config.json  compute MFU when the trainer prints none: plan's FLOPs per token
                         for a decoder transformer (6N + 12·L·H·Q·T, PaLM appendix B; N without
                         the input embedding) x the tokens/s the trainer prints (tokens_per_sec,
                         tok/s ...) or --tokens-per-step over its step time, over the dense
                         peak of the job's GPUs (data/gpus.json)
  --seq T                tokens per sequence (required with --model)
  --tokens-per-step N    tokens one optimizer step trains on this node (batch x seq x grad
                         accumulation x local processes)
  --dtype bf16|fp16|tf32|fp32  the peak MFU is measured against (default bf16)

Dashboard:
  --dashboard[=ADDR]     serve this job's live dashboard and /metrics while it runs (loss
                         and other training curves, GPUs, checkpoint/notice/restart
                         markers); ADDR is HOST:PORT, default 127.0.0.1:9809 (a free port
                         when that one is taken); the URL is printed at start
  --dashboard-token-file F
                         require this bearer token (the file's first line); needed for a
                         non-loopback ADDR. A browser opens http://HOST:PORT/?token=TOKEN once

  --jobs-dir DIR         where jobs live (default: $GPUHOST_HOME/jobs, else
                         ~/.local/state/gpuhost/jobs; Windows %LOCALAPPDATA%\gpuhost\jobs)
  --quiet                do not echo the trainer's output (it is still in the job's logs)
  --json                 print the outcome as JSON on stdout (the trainer's stdout goes to
                         stderr then); schema: doc/run-json.md
  --no-color, --color=auto|always|never
  -h, --help

Exit codes:
  0    the trainer finished (exit code 0)
  2    bad command line (a bad --remote URL, encryption suite or key included); nothing
       was created
  3    could not supervise: job locked by another gpuhost run, unwritable job directory,
       a remote that cannot be listed or written (without --remote-optional)
  4    failed: restarts exhausted, or the trainer cannot be started
  5    the trainer finished, but committed checkpoints are NOT durable on the remote
       (named in the last line); run the same command again to retry the uploads
  75   preempted: checkpoint saved (or the newest kept) and the trainer stopped; run the same
       command again to resume (Slurm --requeue, Kubernetes restartPolicy and SkyPilot
       recover_on_exit_codes can key on 75, EX_TEMPFAIL). Also: another node of a
       multi-node job was lost (outcome peer_lost); rerun every node
  130  stopped by Ctrl-C after saving

Several nodes (one gpuhost per node, as the engine's task):
  gpuhost reads where it runs from what the engine gives, no flags: the torchrun command
  (--nnodes, --node-rank, --master-addr, --rdzv-endpoint, or their PET_* variables), Slurm
  (SLURM_JOB_ID, SLURM_NODEID, SLURM_STEP_NODELIST, SLURM_RESTART_COUNT), a Kubernetes Indexed
  Job (JOB_COMPLETION_INDEX) or SkyPilot (SKYPILOT_NODE_RANK). gpuhost status shows it. When an
  engine restarts the job (torchrun --max-restarts > 0, Slurm requeue, a Job or JobSet policy),
  gpuhost does not restart the trainer itself unless --max-restarts says so. The trainer sees
  GPUHOST_NNODES, GPUHOST_NODE_RANK and GPUHOST_ATTEMPT (engine restarts folded in).
  The nodes' gpuhosts talk to each other (node 0 listens, the others connect): a notice on
  any node reaches every node with the earliest deadline; before the first trainer starts
  they agree on the newest step every node committed and all resume from it; a node that
  dies or goes silent (10 s without a heartbeat) gets the others' trainers stopped at once
  instead of after torchrun's minutes, and they exit 75 for the engine to restart the gang.
  Under Slurm node 0 then runs scontrol requeue (examples/slurm/train.sbatch).
  Windows: one node only (several GPUs with gloo); multi-node torch does not run on native
  Windows, so such a command is refused (use Linux or WSL2). doc/run-multinode.md.
  --peer-port N          node 0's port for the other nodes (else GPUHOST_PEER_PORT, else the
                         torchrun master/rendezvous port + 1, else 29501)
  --peer-token-file F    the token every node presents (else GPUHOST_PEER_TOKEN); required
                         when node 0 is not on loopback
  --no-peers             run each node on its own (no channel between the nodes)

Examples:
  # any PyTorch script that takes a resume path; rehearse a crash at 60 s
  gpuhost run --checkpoints out/ckpt --drill kill@60 -- python train.py --resume {resume}
  # Hugging Face Trainer, keep 3 checkpoints, AWS spot notices
  gpuhost run --checkpoints out --preset hf --keep 3 -- python run_clm.py --output_dir out ...
  # Ultralytics YOLO (rewrites weights/last.pt: gpuhost keeps a copy of each good one)
  gpuhost run --checkpoints runs/detect/train/weights/last.pt --preset ultralytics -- yolo train data=coco.yaml
  # Slurm: sbatch --requeue --signal=B:TERM@120 ... gpuhost run --job-file gpuhost.toml
  # watch loss curves and GPUs live in a browser (the URL is printed)
  gpuhost run --checkpoints ckpt --dashboard -- python train.py --resume {resume}
  # torchrun: the save signal reaches the workers that handle it, never the agent
  gpuhost run --checkpoints ckpt -- torchrun --nproc_per_node=8 train.py --resume {resume}
  # a new experiment in a folder that still holds an old one's checkpoints
  gpuhost run --checkpoints out --fresh -- python train.py
  # fail fast when the bucket is wrong, or train anyway and learn at the end (exit 5)
  gpuhost run --checkpoints ckpt --remote s3://bucket/run --remote-optional -- python train.py
  # GPU 1 only (the trainer gets its UUID in CUDA_VISIBLE_DEVICES), or one MIG slice
  gpuhost run --gpu 1 --checkpoints ckpt -- python train.py
  gpuhost run --gpu MIG-4f2c... --checkpoints ckpt -- python train.py
  gpuhost run --gpu mig:3g.40gb --checkpoints ckpt -- python train.py   # any free 3g.40gb slice
  gpuhost run --gpu 0 --gpu-share mps:threads=50,mem=30G --checkpoints a -- python train_a.py
  gpuhost run --gpu 0 --gpu-memory-fraction 0.3 --checkpoints ckpt -- python train.py
  # rehearse a spot reclaim with 30 s notice, then resume
  gpuhost run --checkpoints ckpt --drill preempt@20 -- python train.py --resume {resume}; gpuhost run --checkpoints ckpt -- python train.py --resume {resume}
)";

namespace {

constexpr FlagSpec k_run_flags[] = {
    {"--job-file", true},
    {"--name", true},
    {"--checkpoints", true},
    {"--workdir", true},
    {"--env", true},
    {"--gpu", true},
    {"--gpu-memory-fraction", true},
    {"--gpu-share", true},
    {"--model", true},
    {"--seq", true},
    {"--tokens-per-step", true},
    {"--dtype", true},
    {"--keep", true},
    {"--settle", true},
    {"--marker", true},
    {"--advise", true},
    {"--snapshots", true},
    {"--save-request", true},
    {"--save-signal", true},
    {"--stop-signal", true},
    {"--stop-grace", true},
    {"--safety-margin", true},
    {"--cloud", true},
    {"--metadata-endpoint", true},
    {"--poll-interval", true},
    {"--max-restarts", true},
    {"--backoff", true},
    {"--max-backoff", true},
    {"--crash-loop", true},
    {"--crash-window", true},
    {"--drill", true},
    {"--jobs-dir", true},
    {"--quiet", false},
    {"--preset", true},
    {"--remote", true},
    {"--encrypt", true},
    {"--encryption-key-file", true},
    {"--dashboard", true},
    {"--dashboard-token-file", true},
    {"--fresh", false},
    {"--remote-optional", false},
    {"--final-upload-timeout", true},
    {"--peer-port", true},
    {"--peer-token-file", true},
    {"--no-peers", false},
    {"--signal-deadline", true},
};

constexpr std::string_view k_default_dashboard = "127.0.0.1:9809";

Error usage(std::string message) { return Error{ErrorCode::invalid_argument, std::move(message)}; }

Result<int> int_flag(const ParsedArgs& p, std::string_view name, int low, int high) {
  auto text = p.value(name);
  auto value = parse_int(*text);
  if (!value || *value < low || *value > high)
    return std::unexpected(usage(std::string(name) + " expects a whole number from " + std::to_string(low) + " to " +
                                 std::to_string(high) + ", got '" + *text + "'"));
  return static_cast<int>(*value);
}

Result<std::chrono::milliseconds> duration_flag(const ParsedArgs& p, std::string_view name) {
  auto parsed = supervise::parse_duration(*p.value(name));
  if (!parsed) return std::unexpected(usage(std::string(name) + ": " + parsed.error().message));
  return *parsed;
}

Result<platform::ChildSignal> signal_flag(const ParsedArgs& p, std::string_view name) {
  auto text = *p.value(name);
  auto parsed = platform::parse_child_signal(text);
  if (!parsed)
    return std::unexpected(usage(std::string(name) + ": unknown signal '" + text +
                                 "' (use SIGUSR1, SIGUSR2, SIGTERM, SIGINT, SIGHUP or CTRL_BREAK)"));
  return *parsed;
}

struct DashboardSpec {
  std::string host;
  std::uint16_t port = 0;
  std::string token;  // empty: none (loopback only)
};

// --gpu mig:<profile> or MIG-<uuid>: the slices that may be taken, one claimed as the job starts.
struct MigChoice {
  std::string request;
  std::vector<gpu::GpuAssignment::Device> candidates;
};

struct RunOptions {
  supervise::SupervisorOptions supervisor;
  std::vector<std::string> gpu_lines;  // what --gpu chose, for the console
  std::optional<MigChoice> mig_choice;
  std::optional<double> memory_fraction;  // --gpu-memory-fraction
  std::optional<GpuShare> gpu_share;      // --gpu-share
  int visible_device_count = 0;           // what --gpu chose (0: all the host's)
  std::vector<std::string> gpu_names;     // the NVML names of the GPUs the job uses
  bool quiet = false;
  bool remote_optional = false;
  std::optional<DashboardSpec> dashboard;
};

// A token file's first line, trimmed. not_found when it cannot be read, a usage error when empty.
Result<std::string> read_token_file(std::string_view flag, const std::string& path) {
  auto text = platform::read_file(path);
  if (!text) return std::unexpected(Error{ErrorCode::not_found, "cannot read " + std::string(flag) + ": " + text.error().message});
  auto lines = split_lines(*text);
  std::string token = lines.empty() ? "" : std::string(trim(lines[0]));
  if (token.empty()) return std::unexpected(usage(std::string(flag) + " " + path + " is empty"));
  return token;
}

// "HOST:PORT", "[::1]:PORT", ":PORT" (loopback) or "HOST" (port 9809).
Result<DashboardSpec> parse_dashboard(const ParsedArgs& p) {
  std::string text = *p.value("--dashboard");
  if (text.empty()) text = std::string(k_default_dashboard);
  DashboardSpec spec;
  std::string port_text = "9809";
  if (text.starts_with('[')) {
    auto close = text.find(']');
    if (close == std::string::npos) return std::unexpected(usage("--dashboard: unclosed '[' in '" + text + "'"));
    spec.host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return std::unexpected(usage("--dashboard expects HOST:PORT, got '" + text + "'"));
      port_text = text.substr(close + 2);
    }
  } else if (auto colon = text.rfind(':'); colon != std::string::npos && text.find(':') == colon) {
    spec.host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  } else {
    spec.host = text;
  }
  if (spec.host.empty()) spec.host = "127.0.0.1";
  auto port = parse_int(port_text);
  if (!port || *port < 0 || *port > 65535)
    return std::unexpected(usage("--dashboard: port must be 0..65535, got '" + port_text + "'"));
  spec.port = static_cast<std::uint16_t>(*port);
  if (auto file = p.value("--dashboard-token-file")) spec.token = GPUHOST_TRY(read_token_file("--dashboard-token-file", *file));
  if (!platform::is_loopback_address(spec.host) && spec.token.empty())
    return std::unexpected(usage("--dashboard=" + text + " would show the job to the network without authentication; "
                                 "give --dashboard-token-file FILE, or use a loopback address and an SSH tunnel"));
  return spec;
}

// --peer-port / GPUHOST_PEER_PORT, --peer-token-file / GPUHOST_PEER_TOKEN, --no-peers.
Result<supervise::PeerSettings> parse_peer_settings(const ParsedArgs& p) {
  supervise::PeerSettings peers;
  peers.enabled = !p.has("--no-peers");
  std::optional<std::string> port_text = p.value("--peer-port");
  std::string port_source = "--peer-port";
  if (!port_text) {
    port_text = platform::get_env("GPUHOST_PEER_PORT");
    port_source = "GPUHOST_PEER_PORT";
  }
  if (port_text) {
    auto port = parse_int(*port_text);
    if (!port || *port < 1 || *port > 65535)
      return std::unexpected(usage(port_source + " expects a port from 1 to 65535, got '" + *port_text + "'"));
    peers.port = static_cast<std::uint16_t>(*port);
  }
  if (auto file = p.value("--peer-token-file")) {
    peers.token = GPUHOST_TRY(read_token_file("--peer-token-file", *file));
  } else if (auto token = platform::get_env("GPUHOST_PEER_TOKEN")) {
    peers.token = std::string(trim(*token));
  }
  return peers;
}

// The dashboard of one job while it runs: the same exporter and server as `gpuhost serve`,
// limited to this job. Failing to start it never stops the run.
class RunDashboard {
 public:
  RunDashboard(DashboardSpec spec, std::filesystem::path jobs_root) : m_spec(std::move(spec)), m_root(std::move(jobs_root)) {}

  // Returns the URL, or an error message.
  Result<std::string> start(const std::string& job_name) {
    const std::string hostname = platform::collect_system_info().hostname;
    telemetry::ExporterOptions exporter;
    exporter.hostname = hostname;
    exporter.jobs_root = m_root;
    exporter.only_job = job_name;
    m_exporter = std::make_unique<telemetry::MetricsExporter>(std::move(exporter));
    telemetry::HttpServerOptions options;
    options.bind_address = m_spec.host;
    options.port = m_spec.port;
    options.access.token = m_spec.token;
    std::vector<std::string> extra;
    if (!hostname.empty()) extra.push_back(hostname);
    const bool wildcard = m_spec.host == "0.0.0.0" || m_spec.host == "::";
    if (!(wildcard && !m_spec.token.empty())) options.access.allowed_hosts = telemetry::allowed_host_names(m_spec.host, extra);
    auto handler = [exporter = m_exporter.get()](const telemetry::RequestHead& request) { return exporter->handle(request); };
    auto server = telemetry::HttpServer::start(options, handler);
    if (!server && m_spec.port != 0 && m_spec.host + ":" + std::to_string(m_spec.port) == k_default_dashboard) {
      options.port = 0;  // the default port is taken (another run's dashboard): any free one
      server = telemetry::HttpServer::start(options, handler);
    }
    if (!server) return std::unexpected(server.error());
    m_server = std::move(*server);
    const std::string shown = m_spec.host.find(':') != std::string::npos ? "[" + m_spec.host + "]" : m_spec.host;
    return "http://" + (wildcard ? std::string("127.0.0.1") : shown) + ":" + std::to_string(m_server->port()) + "/";
  }

  void stop() {
    if (m_server) m_server->stop();
  }

 private:
  DashboardSpec m_spec;
  std::filesystem::path m_root;
  std::unique_ptr<telemetry::MetricsExporter> m_exporter;
  std::unique_ptr<telemetry::HttpServer> m_server;
};

// Flags and the job file into one spec: the file first, then every flag given on top of it.
Result<RunOptions> parse_run_options(const ParsedArgs& p, std::vector<std::string> command) {
  RunOptions options;
  supervise::JobSpec& spec = options.supervisor.spec;
  if (auto file = p.value("--job-file")) {
    auto loaded = supervise::load_job_file(*file, spec);
    if (!loaded) return std::unexpected(loaded.error());
  }
  if (!command.empty()) spec.command = std::move(command);
  if (auto v = p.value("--name")) spec.name = *v;
  if (auto v = p.value("--checkpoints")) spec.checkpoint_location = *v;
  if (auto v = p.value("--workdir")) spec.working_directory = *v;
  for (const auto& assignment : p.values("--env")) {
    auto eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0) return std::unexpected(usage("--env expects NAME=VALUE, got '" + assignment + "'"));
    spec.environment.emplace_back(assignment.substr(0, eq), assignment.substr(eq + 1));
  }
  std::optional<gpu::GpuSnapshot> taken;  // NVML is read only when a flag needs it
  auto snapshot = [&]() -> const gpu::GpuSnapshot& {
    if (!taken) taken = gpu::take_snapshot();
    return *taken;
  };
  if (auto v = p.value("--gpu")) {
    if (auto given = supervise::spec_environment_value(spec, "CUDA_VISIBLE_DEVICES"))
      return std::unexpected(
          usage("--gpu and --env CUDA_VISIBLE_DEVICES=" + *given + " both choose the GPUs: give one"));
    const bool windows = platform::current_os() == platform::OsFamily::windows;
    if (v->starts_with("mig:")) {
      auto slices = gpu::free_mig_slices(v->substr(4), snapshot(), windows);
      if (!slices) return std::unexpected(usage(slices.error().message));
      options.mig_choice = MigChoice{*v, std::move(*slices)};
    } else {
      auto assigned = gpu::assign_gpus(*v, snapshot(), windows);
      if (!assigned) return std::unexpected(usage(assigned.error().message));
      if (assigned->devices.size() == 1 && assigned->devices[0].uuid.starts_with("MIG-")) {
        // One slice: claimed when the job starts, so that two runs never share it.
        options.mig_choice = MigChoice{*v, assigned->devices};
      } else {
        spec.environment.emplace_back("CUDA_VISIBLE_DEVICES", assigned->visible_devices());
        options.visible_device_count = static_cast<int>(assigned->devices.size());
        for (const auto& d : assigned->devices)
          for (const auto& device : snapshot().devices)
            if (device.uuid == d.uuid) options.gpu_names.push_back(device.name);
        std::string chosen;
        for (const auto& d : assigned->devices) chosen += (chosen.empty() ? "" : ", ") + d.label;
        options.gpu_lines.push_back("this job uses " + chosen + " (CUDA_VISIBLE_DEVICES=" + assigned->visible_devices() +
                                    ")");
      }
      options.gpu_lines.insert(options.gpu_lines.end(), assigned->notes.begin(), assigned->notes.end());
    }
  }
  if (auto v = p.value("--gpu-memory-fraction")) {
    auto fraction = parse_memory_fraction(*v);
    if (!fraction) return std::unexpected(usage(fraction.error().message));
    options.memory_fraction = *fraction;
  }
  if (auto v = p.value("--gpu-share")) {
    auto share = parse_gpu_share(*v, platform::current_os() == platform::OsFamily::windows);
    if (!share) return std::unexpected(usage(share.error().message));
    if (share->mode == GpuShare::Mode::mps && options.mig_choice)
      return std::unexpected(
          usage("--gpu-share mps with a MIG slice: gpuhost runs one MPS daemon for whole GPUs; a "
                "slice is already its job's own (give --gpu-share mps a whole GPU, or drop it)"));
    options.gpu_share = *share;
  }
  if (auto v = p.value("--model")) {
    if (options.mig_choice)
      return std::unexpected(
          usage("--model with a MIG slice: a slice's share of the GPU's peak is not known to "
                "gpuhost, so MFU is not computed (have the trainer print its own mfu)"));
    MfuRequest request;
    request.model = *v;
    if (p.has("--seq")) request.seq = GPUHOST_TRY(int_flag(p, "--seq", 1, 1 << 24));
    if (p.has("--tokens-per-step"))
      request.tokens_per_step =
          static_cast<double>(GPUHOST_TRY(int_flag(p, "--tokens-per-step", 1, 1 << 30)));
    if (auto dtype = p.value("--dtype")) request.dtype = *dtype;
    if (options.gpu_names.empty())
      for (const auto& device : snapshot().devices) options.gpu_names.push_back(device.name);
    auto basis = mfu_basis_for(request, options.gpu_names);
    if (!basis)
      return std::unexpected(basis.error().code == ErrorCode::parse_error ? basis.error()
                                                                          : usage(basis.error().message));
    options.supervisor.mfu = std::move(*basis);
  } else if (p.has("--seq") || p.has("--tokens-per-step") || p.has("--dtype")) {
    return std::unexpected(usage("--seq, --tokens-per-step and --dtype describe --model NAME: give it too"));
  }
  if (p.has("--keep")) spec.keep = GPUHOST_TRY(int_flag(p, "--keep", 0, 100000));
  if (p.has("--settle")) spec.settle = GPUHOST_TRY(duration_flag(p, "--settle"));
  if (auto v = p.value("--marker")) spec.marker = *v;
  if (auto v = p.value("--preset")) {
    auto preset = supervise::parse_resume_preset(*v);
    if (!preset) return std::unexpected(usage("--preset: unknown '" + *v + "' (hf, lightning, ultralytics, kohya, torchrun, none)"));
    spec.preset = *preset;
  }
  if (auto v = p.value("--snapshots")) {
    if (*v == "auto") options.supervisor.snapshots = supervise::SnapshotPolicy::automatic;
    else if (*v == "always") options.supervisor.snapshots = supervise::SnapshotPolicy::always;
    else if (*v == "never") options.supervisor.snapshots = supervise::SnapshotPolicy::never;
    else return std::unexpected(usage("--snapshots expects auto, always or never, got '" + *v + "'"));
  }
  if (auto v = p.value("--save-request")) {
    using SR = supervise::JobSpec::SaveRequest;
    if (*v == "signal") spec.save_request = SR::signal;
    else if (*v == "file") spec.save_request = SR::file;
    else if (*v == "both") spec.save_request = SR::both;
    else if (*v == "none") spec.save_request = SR::none;
    else return std::unexpected(usage("--save-request expects signal, file, both or none, got '" + *v + "'"));
  }
  if (p.has("--save-signal")) {
    spec.save_signal = GPUHOST_TRY(signal_flag(p, "--save-signal"));
    spec.save_signal_declared = true;
  }
  if (p.has("--stop-signal")) spec.stop_signal = GPUHOST_TRY(signal_flag(p, "--stop-signal"));
  if (p.has("--stop-grace")) spec.stop_grace = GPUHOST_TRY(duration_flag(p, "--stop-grace"));
  if (p.has("--safety-margin")) spec.safety_margin = GPUHOST_TRY(duration_flag(p, "--safety-margin"));
  if (auto v = p.value("--cloud")) {
    static constexpr std::string_view k_clouds[] = {"auto", "none", "aws", "azure", "gcp", "alibaba", "tencent", "volcengine"};
    if (std::find(std::begin(k_clouds), std::end(k_clouds), *v) == std::end(k_clouds))
      return std::unexpected(usage("--cloud: unknown '" + *v + "' (auto, none, aws, azure, gcp, alibaba, tencent, volcengine)"));
    spec.cloud = *v;
  }
  if (auto v = p.value("--metadata-endpoint")) spec.metadata_endpoint = *v;
  if (auto v = p.value("--remote")) spec.remote = *v;
  if (auto v = p.value("--encrypt")) spec.encrypt = *v;
  if (auto v = p.value("--encryption-key-file")) spec.encryption_key_file = std::filesystem::path(*v);
  if (!spec.encrypt.empty() && spec.remote.empty())
    return std::unexpected(usage("--encrypt needs --remote URL: only what leaves the host is encrypted"));
  if (p.has("--poll-interval")) spec.poll_interval = GPUHOST_TRY(duration_flag(p, "--poll-interval"));
  if (p.has("--max-restarts")) {
    spec.restart.max_restarts = GPUHOST_TRY(int_flag(p, "--max-restarts", 0, 1000000));
    spec.restart.max_restarts_given = true;
  }
  if (p.has("--backoff")) spec.restart.initial_backoff = GPUHOST_TRY(duration_flag(p, "--backoff"));
  if (p.has("--max-backoff")) spec.restart.max_backoff = GPUHOST_TRY(duration_flag(p, "--max-backoff"));
  if (p.has("--crash-loop")) spec.restart.crash_loop_failures = GPUHOST_TRY(int_flag(p, "--crash-loop", 0, 1000));
  if (p.has("--crash-window")) spec.restart.crash_loop_window = GPUHOST_TRY(duration_flag(p, "--crash-window"));
  for (const auto& text : p.values("--drill")) {
    auto drill = supervise::parse_drill(text);
    if (!drill) return std::unexpected(drill.error());
    options.supervisor.drills.push_back(*drill);
  }
  options.supervisor.jobs_root = jobs_root_from(p);
  options.quiet = p.has("--quiet");
  options.supervisor.fresh = p.has("--fresh");
  if (auto v = p.value("--advise")) {
    if (*v == "off") {
      options.supervisor.advise_window = std::chrono::milliseconds::zero();
    } else {
      options.supervisor.advise_window = GPUHOST_TRY(duration_flag(p, "--advise"));
      if (options.supervisor.advise_window < std::chrono::seconds(1))
        return std::unexpected(usage("--advise expects at least 1 s, or off, got '" + *v + "'"));
    }
  }
  options.remote_optional = p.has("--remote-optional");
  if (p.has("--final-upload-timeout"))
    options.supervisor.final_upload_timeout = GPUHOST_TRY(duration_flag(p, "--final-upload-timeout"));
  if ((options.remote_optional || p.has("--final-upload-timeout")) && spec.remote.empty())
    return std::unexpected(usage(std::string(options.remote_optional ? "--remote-optional" : "--final-upload-timeout") +
                                 " needs --remote URL"));
  options.supervisor.peers = GPUHOST_TRY(parse_peer_settings(p));
  if (p.has("--signal-deadline")) {
    options.supervisor.signal_deadline = GPUHOST_TRY(duration_flag(p, "--signal-deadline"));
  } else if (auto env = platform::get_env("GPUHOST_SIGNAL_DEADLINE")) {
    auto parsed = supervise::parse_duration(*env);
    if (!parsed) return std::unexpected(usage("GPUHOST_SIGNAL_DEADLINE: " + parsed.error().message));
    options.supervisor.signal_deadline = *parsed;
  }
  if (options.supervisor.signal_deadline.count() <= 0)
    return std::unexpected(usage("--signal-deadline must be more than 0 s"));
  if (p.has("--dashboard")) options.dashboard = GPUHOST_TRY(parse_dashboard(p));
  else if (p.has("--dashboard-token-file")) return std::unexpected(usage("--dashboard-token-file needs --dashboard"));
  if (spec.command.empty()) return std::unexpected(usage("no training command: put it after --, e.g. gpuhost run --checkpoints out -- python train.py"));
  if (spec.checkpoint_location.empty())
    return std::unexpected(usage("--checkpoints is required: the directory (or file) the trainer writes its checkpoints to"));
  return options;
}

int exit_code_for(supervise::Outcome outcome) {
  switch (outcome) {
    case supervise::Outcome::finished: return k_exit_ok;
    case supervise::Outcome::unmirrored: return k_exit_not_durable;
    case supervise::Outcome::preempted:
    case supervise::Outcome::peer_lost: return k_exit_preempted;
    case supervise::Outcome::failed: return k_exit_job_failed;
    case supervise::Outcome::stopped: return k_exit_interrupted;
  }
  return k_exit_job_failed;
}

}  // namespace

int run_run(CommandContext& context) {
  // Everything after the first bare "--" is the training command, untouched.
  std::vector<std::string> own;
  std::vector<std::string> command;
  bool in_command = false;
  for (const auto& arg : context.args) {
    if (!in_command && arg == "--") {
      in_command = true;
      continue;
    }
    // "--dashboard" alone takes the default address (the parser wants a value).
    if (!in_command && arg == "--dashboard") {
      own.push_back("--dashboard=" + std::string(k_default_dashboard));
      continue;
    }
    (in_command ? command : own).push_back(arg);
  }
  std::vector<FlagSpec> specs(std::begin(k_run_flags), std::end(k_run_flags));
  specs.insert(specs.end(), std::begin(k_common_flags), std::end(k_common_flags));
  auto parsed = parse_args(own, specs);
  if (!parsed) return report_error(context.err, parsed.error().message, "see gpuhost run --help", k_exit_usage);
  auto common = common_options(*parsed);
  if (!common) return report_error(context.err, common.error().message, "", k_exit_usage);
  if (common->help) {
    context.out << k_run_help;
    return k_exit_ok;
  }
  if (!parsed->positionals.empty())
    return report_error(context.err, "unexpected argument '" + parsed->positionals.front() + "'",
                        "put the training command after --: gpuhost run --checkpoints out -- python train.py", k_exit_usage);

  auto options = parse_run_options(*parsed, command);
  if (!options) {
    const bool file_problem = options.error().code == ErrorCode::parse_error || options.error().code == ErrorCode::not_found;
    return report_error(context.err, options.error().message, "see gpuhost run --help and doc/job-file.md",
                        file_problem ? k_exit_error : k_exit_usage);
  }
  // Where the job runs, before anything exists: contradictory engine settings and multi-node on
  // Windows are usage errors.
  auto topology = supervise::detect_topology(options->supervisor.spec.command, platform::get_env);
  if (!topology) return report_error(context.err, topology.error().message, "see gpuhost run --help (Several nodes)", k_exit_usage);
  if (auto supported = supervise::check_topology_supported(*topology); !supported)
    return report_error(context.err, supported.error().message, "see gpuhost run --help (Several nodes)", k_exit_usage);
  supervise::RestartPolicy& restart = options->supervisor.spec.restart;
  std::string restart_note;
  if (const std::string owner = topology->restart_owner(); !owner.empty() && !restart.max_restarts_given) {
    restart.max_restarts = 0;  // one restart owner per layer: the engine's
    restart_note = "restarts belong to " + owner + ": gpuhost does not restart the trainer itself (--max-restarts N to change that)";
  }
  if (auto problem = supervise::peer_settings_problem(*topology, options->supervisor.peers))
    return report_error(context.err, *problem, "see gpuhost run --help (Several nodes) and doc/run-multinode.md", k_exit_usage);
  options->supervisor.topology = std::move(*topology);

  TerminalStyle style = TerminalStyle::for_stderr(common->color);
  // The remote before anything exists: a bad URL or key is a usage error (nothing was made), and
  // a store that cannot be listed or written is known before training, not at the first upload.
  if (auto checked = supervise::check_remote_settings(options->supervisor.spec); !checked)
    return report_error(context.err, checked.error().message, "see gpuhost run --help and doc/remote-store.md", k_exit_usage);
  if (!options->supervisor.spec.remote.empty()) {
    if (auto probed = supervise::probe_remote(options->supervisor.spec, std::chrono::seconds(15)); !probed) {
      if (!options->remote_optional)
        return report_error(context.err, "the remote cannot be used: " + probed.error().message,
                            "fix the bucket, endpoint or credentials; or --remote-optional to train with local checkpoints "
                            "until the remote answers (the run then ends with exit 5 if they never get there)",
                            k_exit_error);
      std::cerr << style.dim("gpuhost: ")
                << style.yellow("WARNING: the remote cannot be used now (" + probed.error().message +
                                "); training starts anyway (--remote-optional) and uploads are retried")
                << "\n" << std::flush;
    }
  }
  if (!restart_note.empty()) std::cerr << style.dim("gpuhost: ") << restart_note << "\n" << std::flush;
  // A MIG slice is claimed last, after every other check, and held until this run ends.
  std::optional<GpuClaim> mig_claim;
  if (options->mig_choice) {
    const auto& spec = options->supervisor.spec;
    const std::string owner = (spec.name.empty() ? "a job on " + spec.checkpoint_location.string() : "job " + spec.name) +
                              ", pid " + std::to_string(platform::current_process_id());
    auto claimed = claim_mig_slice(options->supervisor.jobs_root, options->mig_choice->candidates,
                                   options->mig_choice->request, owner);
    if (!claimed)
      return report_error(context.err, claimed.error().message, "", claimed.error().code == ErrorCode::invalid_argument ? k_exit_usage : k_exit_error);
    options->supervisor.spec.environment.emplace_back("CUDA_VISIBLE_DEVICES", claimed->device.uuid);
    options->gpu_lines.insert(options->gpu_lines.begin(), "this job uses " + claimed->device.label +
                                                               " (CUDA_VISIBLE_DEVICES=" + claimed->device.uuid + ")");
    mig_claim.emplace(std::move(*claimed));
  }
  if (options->memory_fraction) {
    auto& environment = options->supervisor.spec.environment;
    std::optional<std::string> python_path = platform::get_env("PYTHONPATH");
    if (auto given = supervise::spec_environment_value(options->supervisor.spec, "PYTHONPATH")) python_path = *given;
    std::erase_if(environment, [](const auto& e) { return e.first == "PYTHONPATH"; });
    auto setup = memory_fraction_setup(*options->memory_fraction, options->supervisor.jobs_root, python_path,
                                       platform::current_os() == platform::OsFamily::windows);
    if (!setup) return report_error(context.err, setup.error().message, "", k_exit_error);
    environment.insert(environment.end(), setup->environment.begin(), setup->environment.end());
    options->gpu_lines.insert(options->gpu_lines.end(), setup->notes.begin(), setup->notes.end());
  }
  std::optional<MpsSession> mps;
  if (options->gpu_share) {
    for (const auto& line : gpu_share_warnings(*options->gpu_share))
      std::cerr << style.dim("gpuhost: ") << style.yellow("WARNING: " + line) << "\n" << std::flush;
    if (options->gpu_share->mode == GpuShare::Mode::mps) {
      std::optional<std::string> pipe =
          supervise::spec_environment_value(options->supervisor.spec, "CUDA_MPS_PIPE_DIRECTORY");
      if (!pipe) pipe = platform::get_env("CUDA_MPS_PIPE_DIRECTORY");
      int devices = options->visible_device_count;
      if (devices == 0) devices = static_cast<int>(gpu::take_snapshot().devices.size());
      auto joined = MpsSession::join(options->supervisor.jobs_root, *options->gpu_share, devices, pipe);
      if (!joined) return report_error(context.err, joined.error().message, "", k_exit_error);
      mps.emplace(std::move(*joined));
      auto& environment = options->supervisor.spec.environment;
      std::erase_if(environment, [&](const auto& e) {
        return std::any_of(mps->environment().begin(), mps->environment().end(),
                           [&](const auto& m) { return m.first == e.first; });
      });
      environment.insert(environment.end(), mps->environment().begin(), mps->environment().end());
      options->gpu_lines.insert(options->gpu_lines.end(), mps->notes().begin(), mps->notes().end());
    }
  }
  for (const auto& line : options->gpu_lines)
    std::cerr << style.dim("gpuhost: ") << line << "\n" << std::flush;
  std::mutex console;
  const bool json_output = common->json;
  if (!options->quiet) {
    options->supervisor.echo = [&](platform::OutputStream stream, std::string_view chunk) {
      std::lock_guard lock(console);
      // With --json, stdout carries only the final document.
      std::ostream& target = (stream == platform::OutputStream::out && !json_output) ? std::cout : std::cerr;
      target.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
      target.flush();
    };
  }
  options->supervisor.on_record = [&](const job::JournalRecord& record) {
    std::string line = render_record_line(record, style);
    if (line.empty()) return;
    std::lock_guard lock(console);
    std::cerr << style.dim("gpuhost: ") << line << "\n" << std::flush;
  };
  options->supervisor.on_message = [&](std::string_view text) {
    std::lock_guard lock(console);
    std::cerr << style.dim("gpuhost: ") << text << "\n" << std::flush;
  };

  std::optional<RunDashboard> dashboard;
  std::string dashboard_url;
  if (options->dashboard) {
    dashboard.emplace(*options->dashboard, options->supervisor.jobs_root);
    options->supervisor.on_job_ready = [&](const std::string& job_name, const std::filesystem::path&) {
      auto url = dashboard->start(job_name);
      std::lock_guard lock(console);
      if (!url) {
        std::cerr << style.dim("gpuhost: ") << style.yellow("dashboard not started: " + url.error().message)
                  << " (training goes on; gpuhost serve --jobs-dir shows it too)\n" << std::flush;
        return;
      }
      dashboard_url = *url;
      std::cerr << style.dim("gpuhost: ") << "dashboard at " << dashboard_url
                << (options->dashboard->token.empty() ? "" : " (open it once with ?token=TOKEN)") << "\n" << std::flush;
    };
  }

  auto result = supervise::run_supervisor(options->supervisor);
  if (dashboard) dashboard->stop();
  if (mps) {
    if (std::string left = mps->leave(); !left.empty())
      std::cerr << style.dim("gpuhost: ") << left << "\n" << std::flush;
  }
  if (!result) {
    // unsupported: a flag this build cannot honour (--encrypt sm4-gcm with OpenSSL 3.0); the
    // message says what to use instead.
    const bool usage_error =
        result.error().code == ErrorCode::invalid_argument || result.error().code == ErrorCode::unsupported;
    std::string hint = result.error().code == ErrorCode::unavailable
                           ? "wait for it to finish, or give this run another --name"
                           : "check that the jobs directory is writable (--jobs-dir, GPUHOST_HOME)";
    return report_error(context.err, result.error().message, usage_error ? "see gpuhost run --help" : hint,
                        usage_error ? k_exit_usage : k_exit_error);
  }
  const int code = exit_code_for(result->outcome);
  if (json_output) {
    json::Value doc = job_status_json(result->state);
    doc["name"] = result->job_name;
    doc["outcome"] = supervise::outcome_name(result->outcome);
    doc["reason"] = result->reason;
    if (!result->stderr_log.empty()) {
      doc["stderr_log"] = result->stderr_log.string();
      json::Value lines = json::Value::array();
      for (const auto& line : result->last_stderr) lines.push_back(line);
      doc["last_stderr"] = std::move(lines);
    }
    doc["exit_code"] = code;
    doc["job_dir"] = result->job_dir.string();
    if (!dashboard_url.empty()) doc["dashboard_url"] = dashboard_url;
    context.out << json::dump(doc, 2) << "\n";
  } else {
    std::lock_guard lock(console);
    std::string summary = std::string(supervise::outcome_name(result->outcome)) + ": " + result->reason;
    std::string colored = result->outcome == supervise::Outcome::finished ? style.green(summary)
                          : result->outcome == supervise::Outcome::failed ? style.red(summary)
                                                                          : style.yellow(summary);
    std::cerr << style.dim("gpuhost: ") << colored << " (exit " << code << "; gpuhost status "
              << result->job_name << " shows the journal)";
    std::cerr << "\n";
    if (!result->stderr_log.empty()) {
      if (!result->last_stderr.empty()) std::cerr << style.dim("gpuhost: ") << "the trainer's last stderr lines:\n";
      for (const auto& line : result->last_stderr) std::cerr << "    " << line << "\n";
      std::cerr << style.dim("gpuhost: ") << "its whole output: " << result->stderr_log.string() << "\n";
    }
  }
  return code;
}

}  // namespace gpuhost::cli
