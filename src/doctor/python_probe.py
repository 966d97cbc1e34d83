# Run by `gpuhost doctor` in each Python interpreter (embedded into the binary at build time).
# Standard library only; prints one line "GPUHOST_PROBE <json>" and never raises.
import json, sys, warnings

import os
r = {"executable": os.path.realpath(sys.executable), "version": "%d.%d.%d" % sys.version_info[:3], "platform": sys.platform}

def find(name):
    try:
        import importlib.util
        return importlib.util.find_spec(name) is not None
    except Exception:
        return False

def dist_version(name):
    try:
        from importlib import metadata
        return metadata.version(name)
    except Exception:
        return ""

t = {"installed": False}
if find("torch"):
    t["installed"] = True
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
            v = torch.backends.cudnn.version() if t["cuda_build"] else None
            t["cudnn_version"] = str(v) if v else ""
        except Exception:
            t["cudnn_version"] = ""
        if t["cuda_available"]:
            n = torch.cuda.device_count()
            t["device_count"] = n
            t["devices"] = ["%s (%d.%d)" % ((torch.cuda.get_device_name(i),) + torch.cuda.get_device_capability(i))
                            for i in range(n)]
    except BaseException as e:
        t["error"] = ("%s: %s" % (type(e).__name__, e))[:2000]
r["torch"] = t

f = {"installed": False}
if find("tensorflow"):
    f["installed"] = True
    try:
        import os
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
        import tensorflow as tf
        f["version"] = str(tf.__version__)
        f["built_with_cuda"] = bool(tf.test.is_built_with_cuda())
        try:
            info = tf.sysconfig.get_build_info()
            f["cuda_build"] = str(info.get("cuda_version", "") or "")
            f["cudnn_build"] = str(info.get("cudnn_version", "") or "")
        except Exception:
            pass
        f["gpus"] = [d.name for d in tf.config.list_physical_devices("GPU")]
    except BaseException as e:
        f["error"] = ("%s: %s" % (type(e).__name__, e))[:2000]
r["tensorflow"] = f
r["tensorflow_gpu_version"] = dist_version("tensorflow-gpu")

sys.stdout.write("\nGPUHOST_PROBE " + json.dumps(r) + "\n")
sys.stdout.flush()
