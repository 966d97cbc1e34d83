# Run by `gpuhost setup` as its last step, in the environment it set up (embedded into the
# binary). Standard library plus the frameworks named on the command line:
#   python - torch [tensorflow] [--expect-gpu]
# Prints one line "GPUHOST_VERIFY <json>" and exits 1 when any check fails.
import json, math, sys

args = sys.argv[1:]
expect_gpu = "--expect-gpu" in args
report = {"expect_gpu": expect_gpu, "problems": []}
problems = report["problems"]


def error_text(e):
    return "%s: %s" % (type(e).__name__, str(e).strip().splitlines()[0] if str(e).strip() else "")


if "torch" in args:
    t = {}
    report["torch"] = t
    try:
        import torch
        t["version"] = torch.__version__
        t["cuda_build"] = torch.version.cuda or ""
        t["cuda_available"] = bool(torch.cuda.is_available())
        device = "cuda" if t["cuda_available"] else "cpu"
        a = torch.randn(512, 512, device=device)
        b = a @ a
        if device == "cuda":
            torch.cuda.synchronize()
            t["device"] = torch.cuda.get_device_name(0)
            t["cudnn"] = torch.backends.cudnn.version()
        else:
            t["device"] = "cpu"
        t["matmul_finite"] = bool(torch.isfinite(b).all().item())
        if not t["matmul_finite"]:
            problems.append("a 512x512 matmul on %s gave non-finite values" % device)
        if expect_gpu:
            if t["version"].endswith("+cpu") or not t["cuda_build"]:
                problems.append("torch %s is a CPU-only build on a host with an NVIDIA GPU" % t["version"])
            elif not t["cuda_available"]:
                problems.append("torch %s (CUDA %s) says torch.cuda.is_available() is False" % (t["version"], t["cuda_build"]))
        try:
            import torchvision
            t["torchvision"] = torchvision.__version__
            tv_local = torchvision.__version__.partition("+")[2]
            torch_local = t["version"].partition("+")[2]
            if tv_local and torch_local and tv_local != torch_local:
                problems.append("torch is +%s but torchvision is +%s: they come from different indexes" % (torch_local, tv_local))
        except ImportError:
            pass
    except Exception as e:
        problems.append("torch: " + error_text(e))

if "tensorflow" in args:
    f = {}
    report["tensorflow"] = f
    try:
        import os
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow as tf
        f["version"] = tf.__version__
        f["gpus"] = [d.name for d in tf.config.list_physical_devices("GPU")]
        total = float(tf.reduce_sum(tf.random.normal([1000, 1000])).numpy())
        f["sum_finite"] = math.isfinite(total)
        if not f["sum_finite"]:
            problems.append("tensorflow: reduce_sum of a random matrix is not finite")
        if expect_gpu and not f["gpus"]:
            problems.append("tensorflow %s lists no GPU" % f["version"])
    except Exception as e:
        problems.append("tensorflow: " + error_text(e))

report["ok"] = not problems
sys.stdout.write("GPUHOST_VERIFY " + json.dumps(report) + "\n")
for p in problems:
    sys.stderr.write("verification failed: " + p + "\n")
sys.exit(0 if report["ok"] else 1)
