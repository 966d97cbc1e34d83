# Run by `gpuhost doctor` in each Python interpreter (embedded into the binary at build time).
# Standard library only; prints one line "GPUHOST_PROBE <json>" and never raises.
#
# Versions and build facts come from the installed files (torch/version.py, TensorFlow's
# build_info.py, package metadata) without importing the frameworks: `import torch` alone takes
# most of a second. The frameworks are imported only where the answer can depend on it, that is
# on a host with an NVIDIA GPU and a GPU build (cuda.is_available(), devices, arch list), or when
# doctor passes --full (gpuhost doctor --full-probe) to catch broken installs everywhere.
import json, os, sys, warnings

gpu_host = "--gpu-host" in sys.argv
full = "--full" in sys.argv
r = {"executable": os.path.realpath(sys.executable), "version": "%d.%d.%d" % sys.version_info[:3],
     "platform": sys.platform}


def package_dir(name):
    try:
        import importlib.util
        spec = importlib.util.find_spec(name)
        if spec and spec.submodule_search_locations:
            return list(spec.submodule_search_locations)[0]
    except Exception:
        pass
    return None


def read_module_vars(path):
    # These files are plain assignments written at build time; executing one alone is cheap and
    # runs far less of the package's code than importing it.
    try:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
        ns = {}
        exec(compile(source, path, "exec"), ns)
        return ns
    except Exception:
        return {}


def dist_version(*names):
    for name in names:
        try:
            from importlib import metadata
            return metadata.version(name)
        except Exception:
            continue
    return ""


def error_text(e):
    return ("%s: %s" % (type(e).__name__, e))[:2000]


t = {"installed": False, "imported": False}
torch_dir = package_dir("torch")
if torch_dir:
    t["installed"] = True
    v = read_module_vars(os.path.join(torch_dir, "version.py"))
    t["version"] = str(v.get("__version__") or dist_version("torch"))
    t["cuda_build"] = v.get("cuda") or ""
    t["hip_build"] = v.get("hip") or ""
    t["cuda_available"] = False
    if full or (gpu_host and (t["cuda_build"] or t["hip_build"])):
        t["imported"] = True
        try:
            import torch
            t["version"] = str(torch.__version__)
            t["cuda_build"] = torch.version.cuda or ""
            t["hip_build"] = getattr(torch.version, "hip", None) or ""
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                t["cuda_available"] = bool(torch.cuda.is_available())
            t["cuda_unavailable_reason"] = " ".join(str(w.message) for w in caught)[:2000]
            try:
                flags = torch._C._cuda_getArchFlags() if hasattr(torch._C, "_cuda_getArchFlags") else None
                t["arch_list"] = flags.split() if flags else list(torch.cuda.get_arch_list())
            except Exception:
                t["arch_list"] = []
            try:
                cudnn = torch.backends.cudnn.version() if t["cuda_build"] else None
                t["cudnn_version"] = str(cudnn) if cudnn else ""
            except Exception:
                t["cudnn_version"] = ""
            if t["cuda_available"]:
                n = torch.cuda.device_count()
                t["device_count"] = n
                t["devices"] = ["%s (%d.%d)" % ((torch.cuda.get_device_name(i),) + torch.cuda.get_device_capability(i))
                                for i in range(n)]
        except BaseException as e:
            t["error"] = error_text(e)
r["torch"] = t

f = {"installed": False, "imported": False}
tf_dir = package_dir("tensorflow")
if tf_dir:
    f["installed"] = True
    f["version"] = dist_version("tensorflow", "tensorflow-cpu", "tensorflow-intel", "tensorflow-macos", "tf-nightly")
    info = read_module_vars(os.path.join(tf_dir, "python", "platform", "build_info.py")).get("build_info") or {}
    f["built_with_cuda"] = bool(info.get("is_cuda_build", False))
    f["cuda_build"] = str(info.get("cuda_version", "") or "")
    f["cudnn_build"] = str(info.get("cudnn_version", "") or "")
    if full or gpu_host:
        f["imported"] = True
        try:
            os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
            import tensorflow as tf
            f["version"] = str(tf.__version__)
            f["built_with_cuda"] = bool(tf.test.is_built_with_cuda())
            f["gpus"] = [d.name for d in tf.config.list_physical_devices("GPU")]
        except BaseException as e:
            f["error"] = error_text(e)
r["tensorflow"] = f
r["tensorflow_gpu_version"] = dist_version("tensorflow-gpu")
# PEP 668: pip refuses to install into an interpreter whose stdlib holds EXTERNALLY-MANAGED,
# unless it runs in a virtual environment.
r["in_venv"] = sys.prefix != getattr(sys, "base_prefix", sys.prefix)
try:
    import sysconfig
    marker = os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")
    r["externally_managed"] = (not r["in_venv"]) and os.path.isfile(marker)
except Exception:
    r["externally_managed"] = False

sys.stdout.write("\nGPUHOST_PROBE " + json.dumps(r) + "\n")
sys.stdout.flush()
