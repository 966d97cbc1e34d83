#include <chrono>
#include <ostream>

#include "base/json.h"
#include "base/strings.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "supervise/checkpoint.h"

namespace gpuhost::cli {

const char k_verify_help[] = R"(Usage: gpuhost verify PATH... [FLAGS]

Validates checkpoints the way `gpuhost run` does before it commits one or resumes from it:
torch.save zip archives (.pt .pth .ckpt .bin: end-of-central-directory, every entry inside the
file, data.pkl and version present, CRC-32 of every stored entry), safetensors (header bounds,
offsets cover the buffer exactly), HF Trainer checkpoint-N/ directories (trainer_state.json
global_step == N, every weights and optimizer file valid), accelerate / kohya state directories,
PyTorch DCP directories (.metadata or per-rank __R.metadata read without running the pickle;
every item's __R_N.distcp file present and long enough, every tensor covered by its chunks, the
torch.save blobs whole). Other files are only checked to be readable. Prints each checkpoint's
format, step, size, content hash, problem and notes.

Flags:
  --structure-only       read headers and directories only (milliseconds for any size):
                         no CRC check, no content hash
  --json                 print the verdicts as JSON (schema: doc/run-json.md)
  --no-color, --color=auto|always|never
  -h, --help

Exit codes:
  0  every PATH is a valid checkpoint
  1  at least one is invalid (truncated, corrupt, incomplete)
  2  bad command line
  3  a PATH cannot be read (missing, permission denied)

Examples:
  gpuhost verify runs/detect/train/weights/last.pt
  gpuhost verify out/checkpoint-1500 --json
  gpuhost verify --structure-only ckpt/*.pt
  gpuhost verify outputs/checkpoint/step-1000      # a DCP folder (torchtitan, FSDP2)
)";

namespace {

constexpr FlagSpec k_verify_flags[] = {{"--structure-only", false}};

json::Value verdict_json(const supervise::CheckpointVerdict& v, double seconds) {
  json::Value doc = json::Value::object();
  doc["path"] = v.path.string();
  doc["format"] = supervise::checkpoint_format_name(v.format);
  doc["valid"] = v.valid;
  doc["problem"] = v.problem;
  doc["size_bytes"] = v.size_bytes;
  doc["step"] = v.step ? json::Value(*v.step) : json::Value();
  doc["files"] = static_cast<std::int64_t>(v.files.size());
  doc["content_hash"] = v.content_hash;
  json::Value notes = json::Value::array();
  for (const std::string& note : v.notes) notes.push_back(note);
  doc["notes"] = std::move(notes);
  doc["seconds"] = seconds;
  return doc;
}

}  // namespace

int run_verify(CommandContext& context) {
  std::vector<FlagSpec> specs(std::begin(k_verify_flags), std::end(k_verify_flags));
  specs.insert(specs.end(), std::begin(k_common_flags), std::end(k_common_flags));
  auto parsed = parse_args(context.args, specs);
  if (!parsed) return report_error(context.err, parsed.error().message, "see gpuhost verify --help", k_exit_usage);
  auto common = common_options(*parsed);
  if (!common) return report_error(context.err, common.error().message, "", k_exit_usage);
  if (common->help) {
    context.out << k_verify_help;
    return k_exit_ok;
  }
  if (parsed->positionals.empty())
    return report_error(context.err, "no checkpoint given", "gpuhost verify PATH...", k_exit_usage);
  const auto depth =
      parsed->has("--structure-only") ? supervise::ValidationDepth::structure : supervise::ValidationDepth::full;
  TerminalStyle style = TerminalStyle::for_stdout(common->color);

  int code = k_exit_ok;
  json::Value list = json::Value::array();
  for (const auto& path : parsed->positionals) {
    const auto started = std::chrono::steady_clock::now();
    auto verdict = supervise::validate_checkpoint(path, depth);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (!verdict) {
      code = k_exit_error;
      if (common->json) {
        json::Value doc = json::Value::object();
        doc["path"] = path;
        doc["error"] = verdict.error().message;
        list.push_back(std::move(doc));
      } else {
        report_error(context.err, verdict.error().message, "", k_exit_error);
      }
      continue;
    }
    if (!verdict->valid && code == k_exit_ok) code = k_exit_findings;
    if (common->json) {
      list.push_back(verdict_json(*verdict, seconds));
      continue;
    }
    context.out << (verdict->valid ? style.green("valid  ") : style.red("INVALID")) << " " << path << "\n";
    context.out << "        " << supervise::checkpoint_format_name(verdict->format) << ", "
                << format_bytes(static_cast<double>(verdict->size_bytes)) << ", " << verdict->files.size()
                << (verdict->files.size() == 1 ? " file" : " files");
    if (verdict->step) context.out << ", step " << *verdict->step;
    char took[32];
    std::snprintf(took, sizeof took, "%.3f s", seconds);
    context.out << ", checked in " << took << "\n";
    if (!verdict->content_hash.empty()) context.out << "        " << style.dim(verdict->content_hash) << "\n";
    if (!verdict->valid) context.out << "        " << style.red(verdict->problem) << "\n";
    for (const std::string& note : verdict->notes) context.out << "        " << style.dim(note) << "\n";
  }
  if (common->json) context.out << json::dump(list, 2) << "\n";
  return code;
}

}  // namespace gpuhost::cli
