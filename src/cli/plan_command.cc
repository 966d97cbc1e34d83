#include <cstdio>
#include <map>
#include <ostream>
#include <sstream>

#include "base/json.h"
#include "base/strings.h"
#include "cli/commands.h"
#include "cli/exit_codes.h"
#include "cli/plan_render.h"
#include "knowledge/knowledge.h"
#include "plan/instances.h"
#include "plan/memory.h"
#include "plan/model.h"
#include "plan/plan_json.h"
#include "plan/ranking.h"
#include "platform/files.h"

namespace gpuhost::cli {

const char k_plan_help[] = R"(Usage: gpuhost plan [MODEL] [FLAGS]

Estimates the GPU memory a training or inference job needs per GPU, itemised and explained
(weights, gradients, optimizer states, LoRA adapters, activations, KV cache, CUDA context,
fragmentation headroom), answers "largest batch / sequence that fits" and "smallest GPU that
fits", and ranks instance types across clouds by the cost of the whole job (on-demand, reserved
where known, and spot with the expected cost of interruptions).

Model (one of):
  MODEL                  a catalog name: llama-3-8b, llama-3.1-70b, llama-3.2-3b, qwen2.5-7b ...
                         qwen2.5-72b, qwen3-0.6b/4b/8b, mistral-7b, gemma-2-2b/9b/27b,
                         whisper-tiny ... whisper-large, yolov8n/s/m/l/x, resnet-18/50/101,
                         sdxl-lora, sdxl-full (--list-models), or a Hugging Face id of one of them
                         (meta-llama/Meta-Llama-3-8B, Qwen/Qwen3-8B)
  --config FILE          a Hugging Face config.json
  --layers N --hidden N --heads N [--kv-heads N] [--vocab N] [--intermediate N] [--params N]

Job:
  --method full|lora|qlora|inference      (default full)
  --precision mixed|fp32|bf16             (default mixed: bf16 + fp32 master, 16 B/param AdamW)
  --optimizer adamw|adamw-8bit|sgd        (default adamw)
  --batch N  --seq N  --grad-accum N  --image-size PX
  --checkpointing none|selective|full     (--gradient-checkpointing = full)
  --no-flash-attention
  --sharding none|ddp|zero1|zero2|zero3|fsdp  --gpus N
  --offload none|optimizer|all            CPU offload of full fine-tuning's model states (DeepSpeed
                                          offload_optimizer / offload_param, FSDP CPUOffload):
                                          the GPU keeps the 16-bit weights, or only the gathered layer
  --framework hf|unsloth                  hf (default): transformers/PEFT/TRL and alike, logits
                                          upcast to fp32 for the loss; unsloth: offloaded gradient
                                          checkpointing and Cut Cross Entropy (no logits stored)
  --lora-rank R  --lora-targets q,k,v,o|all-linear  --no-double-quant
  --weights bf16|fp32|int8|int4           inference weight format
  --context-gib X  --headroom PCT         (defaults 1.31 GiB measured by HF, 10% assumed)

Questions:
  --gpu NAME [--max-batch | --max-seq]    does it fit on NAME; the largest batch/sequence that does
  --list-gpus                             the GPU names gpuhost knows, with memory and dense BF16 TFLOPS
  --smallest-gpu                          the smallest GPU models (and counts) that fit

Ranking (needs the job's total work):
  --gpu-hours H --reference-gpu NAME      H GPU-hours on one reference GPU, or
  --steps N --step-seconds S --reference-gpu NAME
  --catalog FILE                          add instance types (data/instances.json format)
  --skypilot-csv FILE [--cloud NAME]      add a SkyPilot catalog vms.csv
  --bench FILE                            measured BF16 TFLOPS from 'gpuhost bench --json'
  --os linux|windows                      price with the Windows licence (default linux)
  --spot-interruptions-per-hour R (default 0.05, an assumption)  --restart-minutes M (10)
  --checkpoint-every MIN (30)  --checkpoint-minutes MIN (1)
  --top N                                 rows to print (default 15)
  --all-instances                         also rank nodes with more GPUs than the job needs (by
                                          default: the smallest GPU count it fits on, or --gpus)

  --json                 print the result as JSON (schema: doc/plan-json.md)
  --no-color, --color=auto|always|never
  -h, --help

Exit codes:
  0  done (also when the job does not fit: the output says so)
  2  bad command line: unknown model or flag, impossible configuration
  3  could not run: unreadable or malformed --config, --catalog, --skypilot-csv or --bench file

Examples:
  # Llama-3-8B LoRA: memory, then the cheapest way to run 40 A100-hours
  gpuhost plan llama-3-8b --method lora --batch 4 --seq 2048 --gradient-checkpointing
  gpuhost plan llama-3-8b --method qlora --gpu-hours 40 --reference-gpu A100
  # The longest context a QLoRA fine-tune fits on a 24 GB card, with Unsloth
  gpuhost plan llama-3.1-8b --method qlora --framework unsloth --gpu L4 --max-seq
  # SDXL LoRA (preset with no activation model: model states only, no "fits" answer)
  gpuhost plan sdxl-lora
  # YOLOv8 for a production line: largest batch at 1280 px on a T4, Windows prices
  gpuhost plan yolov8m --image-size 1280 --gpu T4 --max-batch
  gpuhost plan yolov8m --batch 16 --gpu-hours 12 --reference-gpu T4 --os windows
  # Whisper fine-tuning
  gpuhost plan whisper-small --batch 16 --smallest-gpu
  gpuhost plan whisper-large --batch 8 --gradient-checkpointing --gpu-hours 20 --reference-gpu A100
)";

namespace {

constexpr FlagSpec k_plan_flags[] = {
    {"--json", false},
    {"--color", true},
    {"--no-color", false},
    {"--help", false, "-h"},
    {"--config", true},
    {"--params", true},
    {"--layers", true},
    {"--hidden", true},
    {"--heads", true},
    {"--kv-heads", true},
    {"--vocab", true},
    {"--intermediate", true},
    {"--method", true},
    {"--precision", true},
    {"--optimizer", true},
    {"--batch", true},
    {"--seq", true},
    {"--grad-accum", true},
    {"--image-size", true},
    {"--checkpointing", true},
    {"--gradient-checkpointing", false},
    {"--no-flash-attention", false},
    {"--sharding", true},
    {"--offload", true},
    {"--framework", true},
    {"--gpus", true},
    {"--lora-rank", true},
    {"--lora-targets", true},
    {"--no-double-quant", false},
    {"--weights", true},
    {"--context-gib", true},
    {"--headroom", true},
    {"--gpu", true},
    {"--max-batch", false},
    {"--max-seq", false},
    {"--smallest-gpu", false},
    {"--gpu-hours", true},
    {"--reference-gpu", true},
    {"--steps", true},
    {"--step-seconds", true},
    {"--catalog", true},
    {"--skypilot-csv", true},
    {"--cloud", true},
    {"--bench", true},
    {"--os", true},
    {"--spot-interruptions-per-hour", true},
    {"--restart-minutes", true},
    {"--checkpoint-every", true},
    {"--checkpoint-minutes", true},
    {"--top", true},
    {"--list-models", false},
    {"--list-gpus", false},
    {"--all-instances", false},
};

constexpr double k_gib = 1024.0 * 1024 * 1024;

// A failure with the exit code it maps to.
struct Failure {
  std::string message;
  std::string hint;
  int code = k_exit_usage;
};

template <typename T>
using Checked = std::expected<T, Failure>;

Failure plan_usage(std::string message) {
  return {std::move(message), "see 'gpuhost plan --help'", k_exit_usage};
}
Failure input(std::string message, std::string hint = "") { return {std::move(message), std::move(hint), k_exit_error}; }

Checked<double> number_flag(const ParsedArgs& p, std::string_view name, double fallback, double min, double max) {
  auto v = p.value(name);
  if (!v) return fallback;
  auto n = parse_double(*v);
  if (!n || *n < min || *n > max) {
    char range[96];
    std::snprintf(range, sizeof range, "%g to %g", min, max);
    return std::unexpected(
        plan_usage(std::string(name) + " must be a number from " + range + ", not '" + *v + "'"));
  }
  return *n;
}

Checked<int> int_flag(const ParsedArgs& p, std::string_view name, int fallback, int min, int max) {
  auto v = p.value(name);
  if (!v) return fallback;
  auto n = parse_int(*v);
  if (!n || *n < min || *n > max)
    return std::unexpected(plan_usage(std::string(name) + " must be a whole number from " +
                                      std::to_string(min) + " to " + std::to_string(max) + ", not '" + *v +
                                      "'"));
  return static_cast<int>(*n);
}

template <typename E>
Checked<E> choice(const ParsedArgs& p, std::string_view name, E fallback, const std::vector<std::pair<std::string, E>>& options) {
  auto v = p.value(name);
  if (!v) return fallback;
  std::vector<std::string> names;
  for (const auto& [text, value] : options) {
    if (text == *v) return value;
    names.push_back(text);
  }
  std::string message = "unknown value '" + *v + "' for " + std::string(name);
  if (auto close = closest_match(*v, names)) message += " (did you mean '" + *close + "'?)";
  return std::unexpected(plan_usage(message + "; one of " + join(names, ", ")));
}

Checked<std::string> read_input(const std::string& path, std::string_view what) {
  auto text = platform::read_file(path);
  if (!text) return std::unexpected(input("reading the " + std::string(what) + ": " + text.error().message));
  return *text;
}

Checked<plan::ModelSpec> choose_model(const ParsedArgs& p, const plan::ModelCatalog& catalog) {
  const bool shape = p.has("--layers") || p.has("--hidden") || p.has("--heads");
  int sources = (p.positionals.empty() ? 0 : 1) + (p.has("--config") ? 1 : 0) + (shape ? 1 : 0);
  if (sources == 0)
    return std::unexpected(plan_usage("name a model, or give --config FILE or --layers/--hidden/--heads"));
  if (sources > 1) return std::unexpected(plan_usage("give one model: a name, --config or the shape flags"));
  if (p.positionals.size() > 1)
    return std::unexpected(plan_usage("one model at a time, got '" + p.positionals[1] + "' too"));
  if (!p.positionals.empty()) {
    auto m = catalog.find(p.positionals.front());
    if (!m) return std::unexpected(Failure{m.error().message, "list the models with 'gpuhost plan --list-models'", k_exit_usage});
    return **m;
  }
  if (auto path = p.value("--config")) {
    auto text = read_input(*path, "config.json");
    if (!text) return std::unexpected(text.error());
    auto m = plan::model_from_hf_config(*text, *path);
    if (!m) return std::unexpected(input(m.error().message, "pass a Hugging Face config.json"));
    return *m;
  }
  plan::ModelSpec m;
  m.key = "custom";
  m.name = "custom transformer";
  m.family = "llm";
  auto layers = int_flag(p, "--layers", 0, 1, 1000);
  auto hidden = int_flag(p, "--hidden", 0, 1, 1 << 20);
  auto heads = int_flag(p, "--heads", 0, 1, 4096);
  auto kv = int_flag(p, "--kv-heads", 0, 1, 4096);
  auto vocab = int_flag(p, "--vocab", 32000, 1, 1 << 24);
  auto inter = int_flag(p, "--intermediate", 0, 1, 1 << 22);
  auto params = number_flag(p, "--params", 0, 1, 1e14);
  for (auto* r : {&layers, &hidden, &heads, &kv, &vocab, &inter})
    if (!*r) return std::unexpected(r->error());
  if (!params) return std::unexpected(params.error());
  if (!*layers || !*hidden || !*heads)
    return std::unexpected(plan_usage("a custom transformer needs --layers, --hidden and --heads"));
  m.layers = *layers;
  m.hidden = *hidden;
  m.heads = *heads;
  m.kv_heads = *kv ? *kv : *heads;
  m.vocab = *vocab;
  m.intermediate = *inter ? *inter : 4 * *hidden;
  m.gated_mlp = *inter != 0;
  if (auto valid = plan::validate_shape(m); !valid) return std::unexpected(plan_usage(valid.error().message));
  m.params = *params > 0 ? *params : m.shape_params();
  m.provenance.source = "command line";
  return m;
}

Checked<plan::JobSetup> job_setup(const ParsedArgs& p, const plan::ModelSpec& model) {
  using namespace plan;
  JobSetup s;
  Method preset = model.preset_method == "lora" ? Method::lora : Method::full;
  auto method = choice<Method>(p, "--method", preset,
                               {{"full", Method::full}, {"lora", Method::lora}, {"qlora", Method::qlora}, {"inference", Method::inference}});
  auto precision = choice<Precision>(p, "--precision", Precision::mixed,
                                     {{"mixed", Precision::mixed}, {"fp32", Precision::fp32}, {"bf16", Precision::bf16}});
  auto optimizer = choice<Optimizer>(p, "--optimizer", Optimizer::adamw,
                                     {{"adamw", Optimizer::adamw}, {"adamw-8bit", Optimizer::adamw_8bit}, {"sgd", Optimizer::sgd}});
  auto ckpt = choice<Checkpointing>(p, "--checkpointing", p.has("--gradient-checkpointing") ? Checkpointing::full : Checkpointing::none,
                                    {{"none", Checkpointing::none}, {"selective", Checkpointing::selective}, {"full", Checkpointing::full}});
  auto sharding = choice<Sharding>(p, "--sharding", Sharding::none,
                                   {{"none", Sharding::none}, {"ddp", Sharding::none}, {"zero1", Sharding::zero1}, {"zero2", Sharding::zero2},
                                    {"zero3", Sharding::zero3}, {"fsdp", Sharding::zero3}});
  auto offload =
      choice<Offload>(p, "--offload", Offload::none,
                      {{"none", Offload::none}, {"optimizer", Offload::optimizer}, {"all", Offload::all}});
  if (!offload) return std::unexpected(offload.error());
  s.offload = *offload;
  auto framework = choice<Framework>(p, "--framework", Framework::hf,
                                     {{"hf", Framework::hf}, {"unsloth", Framework::unsloth}});
  if (!framework) return std::unexpected(framework.error());
  s.framework = *framework;
  auto weights = choice<WeightFormat>(p, "--weights", WeightFormat::bf16,
                                      {{"bf16", WeightFormat::bf16}, {"fp32", WeightFormat::fp32}, {"int8", WeightFormat::int8}, {"int4", WeightFormat::int4}});
  if (!method) return std::unexpected(method.error());
  if (!precision) return std::unexpected(precision.error());
  if (!optimizer) return std::unexpected(optimizer.error());
  if (!ckpt) return std::unexpected(ckpt.error());
  if (!sharding) return std::unexpected(sharding.error());
  if (!weights) return std::unexpected(weights.error());
  s.method = *method;
  s.precision = *precision;
  s.optimizer = *optimizer;
  s.checkpointing = *ckpt;
  s.sharding = *sharding;
  s.inference_weights = *weights;
  auto batch = int_flag(p, "--batch", 1, 1, 1 << 20);
  auto seq = int_flag(p, "--seq", 0, 1, 1 << 24);
  auto accum = int_flag(p, "--grad-accum", 1, 1, 1 << 20);
  auto image = int_flag(p, "--image-size", 0, 16, 16384);
  auto gpus = int_flag(p, "--gpus", 1, 1, 4096);
  auto rank = int_flag(p, "--lora-rank", 16, 1, 65536);
  auto context = number_flag(p, "--context-gib", plan::k_default_context_mib / 1024, 0, 1024);
  auto headroom = number_flag(p, "--headroom", plan::k_default_headroom * 100, 0, 100);
  for (auto* r : {&batch, &seq, &accum, &image, &gpus, &rank})
    if (!*r) return std::unexpected(r->error());
  if (!context) return std::unexpected(context.error());
  if (!headroom) return std::unexpected(headroom.error());
  if (auto b = p.value("--batch"); b && *b == "0")
    return std::unexpected(plan_usage("--batch must be at least 1"));
  s.batch = *batch;
  s.seq = *seq;
  s.grad_accum = *accum;
  s.image_size = *image;
  s.gpus = *gpus;
  s.lora_rank = *rank;
  s.context_bytes = *context * k_gib;
  s.headroom = *headroom / 100;
  s.flash_attention = !p.has("--no-flash-attention");
  s.double_quant = !p.has("--no-double-quant");
  if (auto t = p.value("--lora-targets")) {
    if (*t == "all-linear") {
      s.lora_targets = {"q", "k", "v", "o", "up", "down"};
      if (model.gated_mlp) s.lora_targets.push_back("gate");
    } else {
      s.lora_targets.clear();
      for (const auto& part : split(*t, ',')) s.lora_targets.emplace_back(trim(part));
    }
  }
  return s;
}

// A family row of gpus.json (h100, a100) has no one memory size: name the models that do.
std::string memoryless_gpu_message(const knowledge::GpuModel& gpu, const knowledge::GpuTable& table) {
  std::vector<std::string> sized;
  for (const auto& m : table.models)
    if (m.memory_gb && m.key.starts_with(gpu.key + "-")) sized.push_back(m.key);
  return gpu.name + " comes in several memory sizes (gpus.json gives none for '" + gpu.key + "'): name one" +
         (sized.empty() ? std::string(" (gpuhost plan --list-gpus)") : ": " + join(sized, ", "));
}

void list_gpus(std::ostream& out, const knowledge::GpuTable& table, bool as_json) {
  json::Value list = json::Value::array();
  if (!as_json) {
    char line[200];
    std::snprintf(line, sizeof line, "  %-18s %-28s %8s %10s  %s\n", "key", "name", "memory", "bf16 TF",
                  "architecture");
    out << line;
  }
  for (const auto& m : table.models) {
    if (as_json) {
      json::Value v = json::Value::object();
      v["key"] = m.key;
      v["name"] = m.name;
      v["architecture"] = m.architecture;
      v["memory_gb"] = m.memory_gb ? json::Value(*m.memory_gb) : json::Value();
      v["bf16_dense_tflops"] = json::Value();
      if (m.spec && m.spec->bf16_dense_tflops) v["bf16_dense_tflops"] = *m.spec->bf16_dense_tflops;
      list.push_back(std::move(v));
      continue;
    }
    char memory[32] = "-", tflops[32] = "-", line[256];
    if (m.memory_gb) std::snprintf(memory, sizeof memory, "%g GB", *m.memory_gb);
    if (m.spec && m.spec->bf16_dense_tflops)
      std::snprintf(tflops, sizeof tflops, "%g", *m.spec->bf16_dense_tflops);
    std::snprintf(line, sizeof line, "  %-18s %-28s %8s %10s  ", m.key.c_str(), m.name.c_str(), memory,
                  tflops);
    out << line << m.architecture << "\n";
  }
  if (as_json) out << json::dump(list, 2) << "\n";
}

}  // namespace

int run_plan(CommandContext& context) {
  auto parsed = parse_args(context.args, k_plan_flags);
  if (!parsed) return report_error(context.err, parsed.error().message, "see 'gpuhost plan --help'", k_exit_usage);
  auto common = common_options(*parsed);
  if (!common) return report_error(context.err, common.error().message, "see 'gpuhost plan --help'", k_exit_usage);
  if (common->help) {
    context.out << k_plan_help;
    return k_exit_ok;
  }
  auto fail = [&](const Failure& f) { return report_error(context.err, f.message, f.hint, f.code); };
  const ParsedArgs& p = *parsed;

  auto catalog = plan::builtin_model_catalog();
  if (!catalog) return report_error(context.err, catalog.error().message, "", k_exit_error);
  if (p.has("--list-models")) {
    json::Value list = json::Value::array();
    for (const auto& m : catalog->models) {
      if (common->json) {
        json::Value v = json::Value::object();
        v["key"] = m.key;
        v["name"] = m.name;
        v["family"] = m.family;
        v["architecture"] = plan::architecture_name(m.architecture);
        v["params"] = m.params;
        v["source"] = m.provenance.source;
        list.push_back(std::move(v));
      } else {
        char line[200];
        std::snprintf(line, sizeof line, "  %-16s %-10s %8.3gB  %s\n", m.key.c_str(), m.family.c_str(), m.params / 1e9, m.name.c_str());
        context.out << line;
      }
    }
    if (common->json) context.out << json::dump(list, 2) << "\n";
    return k_exit_ok;
  }
  auto knowledge = knowledge::load_knowledge();
  if (!knowledge) return report_error(context.err, knowledge.error().message, "", k_exit_error);
  if (p.has("--list-gpus")) {
    list_gpus(context.out, knowledge->gpus, common->json);
    return k_exit_ok;
  }
  // Everything goes to `out` and is printed only once every flag and file has been checked: a bad
  // --gpu-hours or --gpu exits 2 with its message alone, never after half a report.
  std::ostringstream out;

  auto model = choose_model(p, *catalog);
  if (!model) return fail(model.error());
  auto setup = job_setup(p, *model);
  if (!setup) return fail(setup.error());
  auto estimate = plan::estimate_memory(*model, *setup);
  if (!estimate) return report_error(context.err, estimate.error().message, "see 'gpuhost plan --help'", k_exit_usage);

  json::Value result = json::Value::object();
  result["model"] = json::Value::object();
  result["model"]["key"] = model->key;
  result["model"]["name"] = model->name;
  result["model"]["params"] = model->params;
  result["model"]["source"] = model->provenance.source;
  result["setup"] = json::Value::object();
  result["setup"]["method"] = plan::method_name(setup->method);
  result["setup"]["precision"] = plan::precision_name(setup->precision);
  result["setup"]["optimizer"] = plan::optimizer_name(setup->optimizer);
  result["setup"]["batch"] = setup->batch;
  result["setup"]["grad_accum"] = setup->grad_accum;
  result["setup"]["checkpointing"] = plan::checkpointing_name(setup->checkpointing);
  result["setup"]["flash_attention"] = setup->flash_attention;
  result["setup"]["sharding"] = plan::sharding_name(setup->sharding);
  result["setup"]["offload"] = plan::offload_name(setup->offload);
  result["setup"]["framework"] = plan::framework_name(setup->framework);
  result["setup"]["gpus"] = setup->gpus;
  result["memory"] = plan::to_json(*estimate);
  if (!common->json) render_estimate(out, *model, *setup, *estimate);

  // A fit answer from a total that leaves activations out would say "fits" for anything.
  if (estimate->basis == "incomplete" && (p.has("--gpu") || p.has("--smallest-gpu")))
    return fail(plan_usage(
        model->name + " has no activation model in gpuhost (" +
        (model->provenance.note.empty() ? std::string("no published measurement to derive one from")
                                        : model->provenance.note) +
        "), so its total is a lower bound and whether it fits cannot be answered; run it once and read "
        "torch.cuda.max_memory_allocated(), or plan with --method inference"));
  // Does it fit on --gpu; the largest batch / sequence.
  if (auto gpu_name = p.value("--gpu")) {
    auto key = plan::resolve_gpu(*gpu_name, knowledge->gpus);
    if (!key) return fail(plan_usage(key.error().message));
    const auto* gpu = knowledge->gpus.find_by_key(*key);
    if (!gpu->memory_gb) return fail(plan_usage(memoryless_gpu_message(*gpu, knowledge->gpus)));
    const double memory = *gpu->memory_gb * k_gib;
    json::Value fit = json::Value::object();
    fit["gpu"] = gpu->key;
    fit["memory_gb"] = *gpu->memory_gb;
    fit["fits"] = estimate->total_bytes <= memory;
    if (!common->json)
      out << "\n"
          << gpu->name << " (" << *gpu->memory_gb
          << " GB): " << (estimate->total_bytes <= memory ? "fits" : "does NOT fit") << "\n";
    if (p.has("--max-batch") || p.has("--max-seq")) {
      auto best = p.has("--max-seq") ? plan::largest_seq(*model, *setup, memory) : plan::largest_batch(*model, *setup, memory);
      if (!best) return fail(plan_usage(best.error().message));
      const char* what = p.has("--max-seq") ? "largest_seq" : "largest_batch";
      fit[what] = *best ? json::Value(**best) : json::Value(nullptr);
      if (!common->json)
        out << "  " << (p.has("--max-seq") ? "largest sequence length" : "largest micro-batch")
            << " that fits: " << (*best ? std::to_string(**best) : std::string("none (even 1 does not fit)"))
            << "\n";
    }
    result["fit"] = std::move(fit);
  } else if (p.has("--max-batch") || p.has("--max-seq")) {
    return fail(plan_usage("--max-batch and --max-seq need --gpu NAME"));
  }

  if (p.has("--smallest-gpu")) {
    struct Candidate {
      const knowledge::GpuModel* gpu;
      int count;
      double total;
    };
    std::vector<Candidate> found;
    for (const auto& g : knowledge->gpus.models) {
      if (!g.memory_gb) continue;
      for (int count : {1, 2, 4, 8}) {
        plan::JobSetup s = *setup;
        s.gpus = count;
        if (count > 1 && s.sharding == plan::Sharding::none) s.sharding = plan::Sharding::zero3;
        auto e = plan::estimate_memory(*model, s);
        if (e && e->total_bytes <= *g.memory_gb * k_gib) {
          found.push_back({&g, count, *g.memory_gb * count});
          break;
        }
      }
    }
    std::stable_sort(found.begin(), found.end(), [](const Candidate& a, const Candidate& b) { return a.total < b.total; });
    json::Value list = json::Value::array();
    if (!common->json)
      out << "\nsmallest GPUs that fit (count > 1 shards with "
          << (setup->sharding == plan::Sharding::none ? "zero3" : plan::sharding_name(setup->sharding))
          << "):\n";
    for (std::size_t i = 0; i < found.size() && i < 5; ++i) {
      json::Value v = json::Value::object();
      v["gpu"] = found[i].gpu->key;
      v["count"] = found[i].count;
      v["memory_gb"] = *found[i].gpu->memory_gb;
      list.push_back(std::move(v));
      if (!common->json)
        out << "  " << found[i].count << " x " << found[i].gpu->name << " (" << *found[i].gpu->memory_gb
            << " GB)\n";
    }
    if (found.empty() && !common->json) out << "  none with up to 8 GPUs\n";
    result["smallest_gpus"] = std::move(list);
  }

  // Ranking by the cost of the whole job.
  const bool ranking_asked = p.has("--gpu-hours") || p.has("--steps");
  if (ranking_asked) {
    auto ref_name = p.value("--reference-gpu");
    if (!ref_name)
      return fail(
          plan_usage("--gpu-hours / --steps need --reference-gpu NAME (the GPU the work was measured on)"));
    auto ref = plan::resolve_gpu(*ref_name, knowledge->gpus);
    if (!ref) return fail(plan_usage(ref.error().message));
    plan::Work work;
    work.reference_gpu = *ref;
    work.max_gpus = p.has("--gpus") ? setup->gpus : 0;
    work.all_instances = p.has("--all-instances");
    if (p.has("--gpu-hours")) {
      auto h = number_flag(p, "--gpu-hours", 0, 0.001, 1e9);
      if (!h) return fail(h.error());
      work.reference_gpu_hours = *h;
    } else {
      auto steps = number_flag(p, "--steps", 0, 1, 1e12);
      auto secs = number_flag(p, "--step-seconds", 0, 0.0001, 1e6);
      if (!steps) return fail(steps.error());
      if (!secs) return fail(secs.error());
      if (!p.has("--step-seconds"))
        return fail(plan_usage("--steps needs --step-seconds (seconds per step on the reference GPU)"));
      work.reference_gpu_hours = *steps * *secs / 3600;
    }
    auto instances = plan::builtin_instance_catalog();
    if (!instances) return report_error(context.err, instances.error().message, "", k_exit_error);
    for (const auto& path : p.values("--catalog")) {
      auto text = read_input(path, "catalog");
      if (!text) return fail(text.error());
      auto more = plan::parse_instance_catalog(*text, path);
      if (!more) return fail(input(more.error().message, "see data/instances.json for the format"));
      plan::merge_catalog(*instances, std::move(*more));
    }
    for (const auto& path : p.values("--skypilot-csv")) {
      auto text = read_input(path, "SkyPilot catalog");
      if (!text) return fail(text.error());
      std::string cloud = p.value("--cloud").value_or("");
      if (cloud.empty())
        for (const char* c : {"aws", "gcp", "azure", "lambda", "oci", "ibm"})
          if (contains_icase(path, c)) cloud = c;
      if (cloud.empty()) cloud = "skypilot";
      auto more = plan::parse_skypilot_csv(*text, path, cloud, knowledge->gpus);
      if (!more) return fail(input(more.error().message, "pass a SkyPilot catalog vms.csv"));
      plan::merge_catalog(*instances, std::move(*more));
    }
    auto throughput = std::optional<plan::ThroughputTable>(plan::spec_throughput(knowledge->gpus));
    for (const auto& path : p.values("--bench")) {
      auto text = read_input(path, "bench result");
      if (!text) return fail(text.error());
      auto measured = plan::parse_bench_result(*text, path, knowledge->gpus);
      if (!measured) return fail(input(measured.error().message, "pass the JSON written by 'gpuhost bench --json'"));
      for (auto& t : *measured) throughput->set(std::move(t));
    }
    plan::SpotPolicy spot;
    auto rate = number_flag(p, "--spot-interruptions-per-hour", spot.interruptions_per_hour, 0, 100);
    auto restart = number_flag(p, "--restart-minutes", spot.restart_hours * 60, 0, 100000);
    auto every = number_flag(p, "--checkpoint-every", spot.checkpoint_interval_hours * 60, 0.01, 100000);
    auto write = number_flag(p, "--checkpoint-minutes", spot.checkpoint_write_hours * 60, 0, 100000);
    for (auto* r : {&rate, &restart, &every, &write})
      if (!*r) return fail(r->error());
    spot.interruptions_per_hour = *rate;
    spot.rate_assumed = !p.has("--spot-interruptions-per-hour");
    spot.restart_hours = *restart / 60;
    spot.checkpoint_interval_hours = *every / 60;
    spot.checkpoint_write_hours = *write / 60;
    auto os = choice<knowledge::Os>(p, "--os", knowledge::Os::linux, {{"linux", knowledge::Os::linux}, {"windows", knowledge::Os::windows}});
    if (!os) return fail(os.error());
    auto top = int_flag(p, "--top", 15, 1, 100000);
    if (!top) return fail(top.error());
    std::map<int, plan::MemoryEstimate> cache;
    auto memory_for = [&](int gpus) -> Result<plan::MemoryEstimate> {
      plan::JobSetup s = *setup;
      s.gpus = setup->sharding == plan::Sharding::none ? 1 : gpus;
      return plan::estimate_memory(*model, s);
    };
    auto ranking = plan::rank_instances(*instances, *throughput, work, spot, *os, memory_for);
    if (!ranking) return fail(plan_usage(ranking.error().message));
    result["ranking"] = plan::to_json(*ranking);
    result["ranking"]["reference_gpu"] = work.reference_gpu;
    result["ranking"]["reference_gpu_hours"] = work.reference_gpu_hours;
    result["ranking"]["os"] = knowledge::os_name(*os);
    json::Value warnings = json::Value::array();
    for (const auto& w : instances->warnings) warnings.push_back(w);
    result["ranking"]["catalog_warnings"] = std::move(warnings);
    if (!common->json) {
      char hours[40];
      std::snprintf(hours, sizeof hours, work.reference_gpu_hours >= 1e5 ? "%.0f" : "%.6g",
                    work.reference_gpu_hours);
      out << "\nWhole job: " << hours << " GPU-hours on " << work.reference_gpu << ", "
          << knowledge::os_name(*os) << " prices\n";
      render_ranking(out, *ranking, instances->warnings, *top, plan_output_width());
    }
  }
  if (common->json) out << json::dump(result, 2) << "\n";
  context.out << out.str();
  return k_exit_ok;
}

}  // namespace gpuhost::cli
