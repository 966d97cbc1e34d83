#include "cli/ckpt_command.h"

#include <filesystem>
#include <ostream>

#include "base/json.h"
#include "base/strings.h"
#include "cli/exit_codes.h"
#include "cli/terminal_style.h"
#include "crypt/cipher_suite.h"
#include "crypt/encryption_key.h"
#include "job/journal.h"
#include "platform/environment.h"
#include "platform/process.h"
#include "store/store.h"
#include "supervise/checkpoint.h"
#include "supervise/job.h"
#include "supervise/remote_checkpoint.h"

namespace gpuhost::cli {

const char k_ckpt_help[] = R"(Usage: gpuhost ckpt list|verify|pull|push|prune --remote URL --job NAME [FLAGS]

Checkpoints in object storage, as `gpuhost run --remote` mirrors them (doc/remote-store.md):
each is a manifest (files, sizes, SHA-256 of every object and part, encryption, MAC) written
after its objects.

  list                 the job's remote checkpoints, newest first, and any whose manifest
                       does not read or authenticate
  verify [ID]          download one (default: the newest) to a temporary folder and check
                       every size, hash, chunk tag and the checkpoint itself; nothing is kept
  pull [ID] --to DIR   download one into DIR (under its own name), verified, renamed into
                       place only when whole
  push PATH            upload a local checkpoint file or directory with a manifest
  prune --keep K       delete all but the newest K checkpoints (--dry-run: only say which)

Flags:
  --remote URL           s3://bucket/prefix?endpoint=...&region=..., or file:///dir
  --job NAME             the job's name (as gpuhost run names it: gpuhost jobs)
  --to DIR               pull: where to put the checkpoint
  --keep K               prune: how many to keep
  --dry-run              prune: list what would be deleted, delete nothing
  --node K               the copies of node K of a multi-node job with node-local folders
                         (<job>/node-K/, doc/run-multinode.md)
  --encrypt SUITE        push: aes-256-gcm or sm4
  --encryption-key-file FILE
                         the key for encrypted checkpoints (else GPUHOST_ENCRYPTION_KEY_FILE
                         or GPUHOST_ENCRYPTION_KEY)
  --json                 print the result as JSON
  --no-color, --color=auto|always|never
  -h, --help

Exit codes:
  0  done; verify: the checkpoint is intact
  1  verify: the checkpoint is damaged, edited, or needs another key
  2  bad command line
  3  the store or a file cannot be used

Examples:
  gpuhost ckpt list --remote 's3://ml/ckpt?endpoint=http://127.0.0.1:9000' --job llama
  gpuhost ckpt verify --remote s3://ml/ckpt --job llama --json
  gpuhost ckpt pull step-000000001200-0a1b2c3d4e5f6a7b --remote s3://ml/ckpt --job llama --to out
  gpuhost ckpt push out/checkpoint-1200 --remote s3://ml/ckpt --job llama --encrypt aes-256-gcm
  gpuhost ckpt prune --keep 3 --dry-run --remote s3://ml/ckpt --job llama
  gpuhost ckpt list --remote s3://ml/ckpt --job llama --node 1
)";

namespace {

namespace fs = std::filesystem;

constexpr FlagSpec k_ckpt_flags[] = {{"--remote", true},  {"--job", true},     {"--to", true},
                                     {"--keep", true},    {"--encrypt", true}, {"--encryption-key-file", true},
                                     {"--dry-run", false}, {"--node", true}};

struct Session {
  std::unique_ptr<store::ObjectStore> store;
  std::optional<crypt::EncryptionKey> key;
  std::string job;
  [[nodiscard]] const crypt::EncryptionKey* key_ptr() const { return key ? &*key : nullptr; }
};

json::Value manifest_summary(const supervise::CheckpointManifest& m) {
  json::Value doc = json::Value::object();
  doc["remote_id"] = m.remote_id;
  doc["name"] = m.name;
  doc["format"] = m.format;
  doc["step"] = m.step ? json::Value(*m.step) : json::Value();
  doc["size_bytes"] = m.size_bytes;
  doc["files"] = static_cast<std::int64_t>(m.files.size());
  doc["content_hash"] = m.content_hash;
  doc["created_at"] = m.created_at;
  doc["encryption"] = m.suite.empty() ? json::Value() : json::Value(m.suite);
  doc["key_id"] = m.key_id.empty() ? json::Value() : json::Value(m.key_id);
  doc["checkpoint_id"] = m.checkpoint_id;
  return doc;
}

// The manifest named `id`, or the newest one that authenticates.
Result<supervise::CheckpointManifest> pick(Session& s, const std::optional<std::string>& id) {
  if (id) return supervise::read_manifest(*s.store, s.job, *id, s.key_ptr());
  auto entries = GPUHOST_TRY(supervise::list_remote_checkpoints(*s.store, s.job, s.key_ptr()));
  const std::string what = "finding a checkpoint of job " + s.job + " in " + s.store->describe() + ": ";
  if (entries.empty()) return make_error(ErrorCode::not_found, what + "there is none");
  // The newest manifest does not read or authenticate: the checkpoint is damaged (exit 1).
  if (!entries.front().manifest) return make_error(ErrorCode::parse_error, what + entries.front().problem);
  return *entries.front().manifest;
}

int list(CommandContext& context, Session& s, bool as_json, const TerminalStyle& style) {
  auto entries = supervise::list_remote_checkpoints(*s.store, s.job, s.key_ptr());
  if (!entries) return report_error(context.err, entries.error().message, "", k_exit_error);
  if (as_json) {
    json::Value list = json::Value::array();
    for (const auto& e : *entries) {
      json::Value doc = e.manifest ? manifest_summary(*e.manifest) : json::Value::object();
      doc["manifest"] = e.key;
      doc["problem"] = e.problem.empty() ? json::Value() : json::Value(e.problem);
      list.push_back(std::move(doc));
    }
    context.out << json::dump(list, 2) << "\n";
    return k_exit_ok;
  }
  if (entries->empty()) context.out << "no checkpoints of job " << s.job << " in " << s.store->describe() << "\n";
  for (const auto& e : *entries) {
    if (!e.manifest) {
      context.out << style.red("unusable ") << e.key << "\n         " << e.problem << "\n";
      continue;
    }
    const auto& m = *e.manifest;
    context.out << m.remote_id << "  " << m.name << ", " << format_bytes(static_cast<double>(m.size_bytes));
    if (m.step) context.out << ", step " << *m.step;
    context.out << ", " << (m.suite.empty() ? std::string("not encrypted") : m.suite + " key " + m.key_id) << ", "
                << m.created_at << "\n";
  }
  return k_exit_ok;
}

}  // namespace

int run_ckpt(CommandContext& context) {
  std::vector<FlagSpec> specs(std::begin(k_ckpt_flags), std::end(k_ckpt_flags));
  specs.insert(specs.end(), std::begin(k_common_flags), std::end(k_common_flags));
  auto parsed = parse_args(context.args, specs);
  if (!parsed) return report_error(context.err, parsed.error().message, "see gpuhost ckpt --help", k_exit_usage);
  auto common = common_options(*parsed);
  if (!common) return report_error(context.err, common.error().message, "", k_exit_usage);
  if (common->help) {
    context.out << k_ckpt_help;
    return k_exit_ok;
  }
  const auto& args = parsed->positionals;
  if (args.empty()) return report_error(context.err, "no action given", "gpuhost ckpt list|verify|pull|push|prune", k_exit_usage);
  const std::string action = args.front();
  if (action != "list" && action != "verify" && action != "pull" && action != "push" && action != "prune")
    return report_error(context.err, "unknown action '" + action + "'", "gpuhost ckpt list|verify|pull|push|prune", k_exit_usage);
  auto remote = parsed->value("--remote");
  auto job = parsed->value("--job");
  if (!remote || !job)
    return report_error(context.err, "gpuhost ckpt " + action + " needs --remote URL and --job NAME", "", k_exit_usage);
  if (!job::is_valid_job_name(*job))
    return report_error(context.err, "--job '" + *job + "' is not a job name", "", k_exit_usage);

  Session s;
  s.job = *job;
  if (auto node = parsed->value("--node")) {
    auto rank = parse_int(*node);
    if (!rank || *rank < 0 || *rank > 65535)
      return report_error(context.err, "--node expects a node rank (0, 1, ...), got '" + *node + "'", "", k_exit_usage);
    s.job = supervise::node_mirror_scope(*job, static_cast<int>(*rank));
  }
  if (parsed->has("--dry-run") && action != "prune")
    return report_error(context.err, "--dry-run is for prune", "", k_exit_usage);
  auto opened = store::open_store(*remote);
  if (!opened) return report_error(context.err, opened.error().message, "", k_exit_usage);
  s.store = std::move(*opened);
  std::optional<fs::path> key_file;
  if (auto f = parsed->value("--encryption-key-file")) key_file = fs::path(*f);
  auto encrypt = parsed->value("--encrypt");
  if (key_file || encrypt || platform::get_env(crypt::k_key_file_env) || platform::get_env(crypt::k_key_env)) {
    auto key = crypt::load_encryption_key(key_file);
    if (!key) return report_error(context.err, "loading the encryption key: " + key.error().message, "", k_exit_usage);
    s.key.emplace(std::move(*key));
  }
  TerminalStyle style = TerminalStyle::for_stdout(common->color);
  std::optional<std::string> id;
  if (args.size() > 1 && action != "push") id = args[1];

  if (action == "list") return list(context, s, common->json, style);

  if (action == "verify" || action == "pull") {
    auto manifest = pick(s, id);
    fs::path dir;
    std::error_code ec;
    if (action == "pull") {
      auto to = parsed->value("--to");
      if (!to) return report_error(context.err, "gpuhost ckpt pull needs --to DIR", "", k_exit_usage);
      dir = *to;
    } else {
      dir = fs::temp_directory_path(ec) / ("gpuhost-verify-" + std::to_string(platform::current_process_id()));
    }
    Result<fs::path> pulled = manifest ? supervise::pull_checkpoint(*s.store, *manifest, s.key_ptr(), dir / fs::path(manifest->name))
                                       : Result<fs::path>(std::unexpected(manifest.error()));
    if (action == "verify") fs::remove_all(dir, ec);
    const bool damaged = !pulled && (pulled.error().code == ErrorCode::parse_error ||
                                     pulled.error().code == ErrorCode::invalid_argument);
    if (common->json) {
      json::Value doc = manifest ? manifest_summary(*manifest) : json::Value::object();
      doc["ok"] = pulled.has_value();
      doc["problem"] = pulled ? json::Value() : json::Value(pulled.error().message);
      if (pulled && action == "pull") doc["path"] = pulled->string();
      context.out << json::dump(doc, 2) << "\n";
    } else if (pulled) {
      context.out << style.green(action == "verify" ? "intact " : "pulled ") << manifest->remote_id
                  << (action == "pull" ? " into " + pulled->string() : std::string()) << "\n";
    } else {
      report_error(context.err, pulled.error().message, "", k_exit_error);
    }
    if (pulled) return k_exit_ok;
    return damaged ? k_exit_findings : k_exit_error;
  }

  if (action == "push") {
    if (args.size() < 2) return report_error(context.err, "gpuhost ckpt push needs the checkpoint's PATH", "", k_exit_usage);
    const fs::path path = args[1];
    auto verdict = supervise::validate_checkpoint(path, supervise::ValidationDepth::full);
    if (!verdict) return report_error(context.err, verdict.error().message, "", k_exit_error);
    if (!verdict->valid) return report_error(context.err, path.string() + ": " + verdict->problem, "", k_exit_findings);
    supervise::RemoteCrypto crypto;
    if (encrypt) {
      auto suite = crypt::choose_suite(*encrypt);
      if (!suite) return report_error(context.err, suite.error().message, "", k_exit_usage);
      crypto.key = s.key_ptr();
      crypto.suite = *suite;
    }
    supervise::PushRequest request;
    request.job = s.job;
    request.remote_id = supervise::remote_checkpoint_id(verdict->step, verdict->content_hash);
    request.checkpoint_id = "manual";
    request.source = path;
    request.name = fs::absolute(path).lexically_normal().filename().string();
    if (request.name.empty()) request.name = fs::absolute(path).lexically_normal().parent_path().filename().string();
    request.format = supervise::checkpoint_format_name(verdict->format);
    request.step = verdict->step;
    request.content_hash = verdict->content_hash;
    std::error_code ec;
    request.staging = fs::temp_directory_path(ec) / ("gpuhost-push-" + request.remote_id);
    auto pushed = supervise::push_checkpoint(*s.store, request, crypto, {});
    if (!pushed) return report_error(context.err, pushed.error().message, "", k_exit_error);
    if (common->json) {
      context.out << json::dump(manifest_summary(*pushed), 2) << "\n";
    } else {
      context.out << style.green("pushed ") << pushed->remote_id << " (" << pushed->files.size() << " files, "
                  << format_bytes(static_cast<double>(pushed->size_bytes)) << ")\n";
    }
    return k_exit_ok;
  }

  // prune
  auto keep_text = parsed->value("--keep");
  auto keep = keep_text ? parse_int(*keep_text) : std::nullopt;
  if (!keep || *keep < 1) return report_error(context.err, "gpuhost ckpt prune needs --keep K (1 or more)", "", k_exit_usage);
  auto entries = supervise::list_remote_checkpoints(*s.store, s.job, s.key_ptr());
  if (!entries) return report_error(context.err, entries.error().message, "", k_exit_error);
  json::Value removed = json::Value::array();
  std::int64_t kept = 0;
  for (const auto& e : *entries) {
    if (!e.manifest) continue;  // unreadable ones are left for a person to look at
    if (kept++ < *keep) continue;
    if (!parsed->has("--dry-run")) {
      auto gone = supervise::remove_remote_checkpoint(*s.store, s.job, e.manifest->remote_id);
      if (!gone) return report_error(context.err, gone.error().message, "", k_exit_error);
    }
    removed.push_back(e.manifest->remote_id);
    if (!common->json) context.out << (parsed->has("--dry-run") ? "would delete " : "deleted ") << e.manifest->remote_id << "\n";
  }
  if (common->json) context.out << json::dump(removed, 2) << "\n";
  return k_exit_ok;
}

}  // namespace gpuhost::cli
