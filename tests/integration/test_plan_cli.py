"""gpuhost plan end to end (Linux, and the Windows build under Wine): memory estimates, ranking
with --json, bad input with the documented exit codes."""
import json
import os
import subprocess
import unittest

from gpuhost_test import SYSTEM_PYTHON, GpuhostTestCase, host_path, needs, run, tmp_dir, torch_available

GOLDEN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden", "plan")
# GPUHOST_UPDATE_GOLDEN=1 rewrites the files from this build's output (review the diff).
UPDATE = os.environ.get("GPUHOST_UPDATE_GOLDEN") == "1"


class Plan(GpuhostTestCase):
    def plan_json(self, args, expect_exit=0):
        proc = run(["plan", "--json"] + list(args))
        self.assertEqual(proc.returncode, expect_exit, proc.stderr + proc.stdout[-2000:])
        return json.loads(proc.stdout)

    def test_lora_estimate_is_itemised(self):
        out = self.plan_json(["llama-3-8b", "--method", "lora", "--batch", "4", "--gradient-checkpointing"])
        ids = [i["id"] for i in out["memory"]["items"]]
        for want in ("weights", "adapters", "activations", "context", "headroom"):
            self.assertIn(want, ids)
        self.assertEqual(out["memory"]["trainable_params"], 13631488)

    def test_ranking_flags_missing_prices_instead_of_zero(self):
        out = self.plan_json(["llama-3-8b", "--method", "qlora", "--gpu-hours", "40", "--reference-gpu", "A100"])
        options = out["ranking"]["options"]
        self.assertTrue(options[0]["fits"])
        self.assertIsNotNone(options[0]["best_total_usd"])
        unpriced = [o for o in options if o["cloud"] == "alibaba"]
        self.assertTrue(unpriced)
        for o in unpriced:
            self.assertIsNone(o["usd_per_hour"])
            self.assertIn("on-demand price missing", o["flags"])

    def test_unknown_model_suggests_and_exits_2(self):
        proc = run(["plan", "llama-3-8bb"])
        self.assertEqual(proc.returncode, 2)
        self.assertIn("did you mean 'llama-3-8b'", proc.stderr)

    def test_impossible_shape_exits_2(self):
        proc = run(["plan", "--layers", "2", "--hidden", "1000", "--heads", "16"])
        self.assertEqual(proc.returncode, 2)
        self.assertIn("do not divide hidden size", proc.stderr)

    def test_malformed_skypilot_csv_exits_3_with_line_and_column(self):
        d = tmp_dir("plan-csv")
        path = os.path.join(d, "vms.csv")
        with open(path, "w") as f:
            f.write("InstanceType,AcceleratorName,AcceleratorCount,Price,Region\ng4dn.xlarge,T4,1,abc,us-east-1\n")
        proc = run(["plan", "yolov8n", "--gpu-hours", "2", "--reference-gpu", "T4", "--skypilot-csv", host_path(path)])
        self.assertEqual(proc.returncode, 3, proc.stderr)
        self.assertIn(":2:18:", proc.stderr)

    @needs(torch_available(), "Debian's python3-torch for /usr/bin/python3")
    def test_resnet_activations_are_what_autograd_keeps(self):
        # The same networks built in PyTorch, every tensor autograd saves for the backward pass
        # summed once per storage: the layer table must give those bytes, image size by image size.
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "resnet_saved_tensors.py")
        for key, depth, size in (("resnet-50", 50, 128), ("resnet-18", 18, 96), ("resnet-101", 101, 64)):
            proc = subprocess.run([SYSTEM_PYTHON, script, str(depth), str(size)], capture_output=True, text=True, timeout=300)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            saved = json.loads(proc.stdout)["bytes"]
            out = self.plan_json([key, "--precision", "fp32", "--optimizer", "sgd", "--batch", "1", "--image-size", str(size)])
            self.assertEqual(out["memory"]["basis"], "layer_table")
            stages = [i for i in out["memory"]["items"] if i["id"] == "activations"]
            self.assertEqual([i["label"] for i in stages], ["activations: " + s for s in
                                                             ("stem", "layer1", "layer2", "layer3", "layer4", "head")])
            estimate = sum(i["bytes"] for i in stages)
            # Within 64 bytes: the loss's scalars are not in the table.
            self.assertLess(abs(estimate - saved), 64, "%s at %d px: table %d bytes, autograd %d" % (key, size, estimate, saved))

    def test_yolov8_activations_are_what_autograd_keeps(self):
        # YOLOv8 built in PyTorch from Ultralytics' model file: the network's stages give autograd's
        # saved bytes exactly; the loss stage (Ultralytics' own loss) is counted apart.
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "yolo_saved_tensors.py")
        for scale, size in (("n", 256), ("m", 128), ("x", 64)):
            proc = subprocess.run([SYSTEM_PYTHON, script, scale, str(size)], capture_output=True, text=True, timeout=300)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            saved = json.loads(proc.stdout)
            out = self.plan_json(["yolov8" + scale, "--precision", "fp32", "--optimizer", "sgd", "--batch", "1",
                                  "--image-size", str(size)])
            self.assertEqual(out["memory"]["basis"], "layer_table")
            self.assertEqual(out["memory"]["trainable_params"], saved["params"] + 16)  # + DFL's fixed 16 bins
            stages = [i for i in out["memory"]["items"] if i["id"] == "activations"]
            self.assertEqual([i["label"] for i in stages], ["activations: " + s for s in
                                                             ("backbone P1-P2", "backbone P3", "backbone P4",
                                                              "backbone P5 + SPPF", "neck", "detect head", "loss")])
            network = sum(i["bytes"] for i in stages[:-1])
            self.assertEqual(network, saved["bytes"], "yolov8%s at %d px" % (scale, size))

    def test_yolov8m_at_its_default_batch_fits_the_t4_ultralytics_trains_it_on(self):
        # Ultralytics' Colab tutorial trains at its defaults (batch 16, 640 px, AMP) on a T4.
        out = self.plan_json(["yolov8m", "--batch", "16", "--gpu", "T4"])
        self.assertTrue(out["fit"]["fits"], out["fit"])
        self.assertLess(out["memory"]["total_bytes"], 15 * 2**30)
        ema = [i for i in out["memory"]["items"] if "EMA" in i["label"]]
        self.assertEqual(len(ema), 1)
        big = self.plan_json(["yolov8m", "--image-size", "1280", "--gpu", "T4", "--max-batch"])
        self.assertGreater(big["fit"]["largest_batch"], 4, big["fit"])
        self.assertLess(big["fit"]["largest_batch"], 16, big["fit"])

    def test_unsloth_fits_a_longer_context_than_transformers_on_the_same_card(self):
        # Unsloth's table: Llama 3.1 8B QLoRA r32 on all linear layers, 24 GB: 78,475 tokens with
        # Unsloth, 5,789 with Hugging Face + FA2. The answers land near those, in that order.
        common = ["llama-3.1-8b", "--method", "qlora", "--lora-rank", "32", "--lora-targets", "all-linear",
                  "--gradient-checkpointing", "--gpu", "L4", "--max-seq"]
        unsloth = self.plan_json(common + ["--framework", "unsloth"])
        hf = self.plan_json(common)
        self.assertEqual(unsloth["setup"]["framework"], "unsloth")
        self.assertEqual(hf["setup"]["framework"], "hf")
        logits = [i for i in unsloth["memory"]["items"] if i["id"] == "logits"]
        self.assertEqual(logits[0]["bytes"], 0, logits)
        self.assertGreater(unsloth["fit"]["largest_seq"], 78475 * 0.75, unsloth["fit"])
        self.assertLess(unsloth["fit"]["largest_seq"], 78475 * 1.5, unsloth["fit"])
        self.assertGreater(hf["fit"]["largest_seq"], 5789 * 0.75, hf["fit"])
        self.assertLess(hf["fit"]["largest_seq"], 5789 * 1.5, hf["fit"])

    def test_resnet_fit_answers_come_from_the_layer_table(self):
        out = self.plan_json(["resnet-50", "--gpu", "T4", "--max-batch", "--optimizer", "sgd"])
        fit = out["fit"]
        # AMP at 224 px: about 43 MB a sample; a T4's 15 GiB holds a few hundred, not 65536.
        self.assertGreater(fit["largest_batch"], 150, fit)
        self.assertLess(fit["largest_batch"], 400, fit)


class PlanGolden(GpuhostTestCase):
    """The human output, byte for byte, at 80 and 160 columns (COLUMNS), on Linux and on the
    Windows build: long flags on lines of their own (never cut, never shifting a column),
    Windows prices present or explained per row, and huge values that keep the columns."""

    CASES = {
        "qlora-ranking": ["llama-3-8b", "--method", "qlora", "--gpu-hours", "40", "--reference-gpu", "A100"],
        "yolo-windows": ["yolov8m", "--batch", "16", "--gpu-hours", "12", "--reference-gpu", "T4", "--os", "windows"],
        "extreme-hours": ["llama-3-8b", "--method", "qlora", "--gpu-hours", "1e9", "--reference-gpu", "A100", "--top", "6"],
    }

    def check(self, name, columns):
        proc = run(["plan"] + self.CASES[name], env={"COLUMNS": str(columns), "NO_COLOR": "1"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        got = proc.stdout.replace("\r\n", "\n")
        path = os.path.join(GOLDEN, "%s-%d.txt" % (name, columns))
        if UPDATE:
            os.makedirs(GOLDEN, exist_ok=True)
            with open(path, "w", newline="\n") as f:
                f.write(got)
        with open(path, newline="") as f:
            want = f.read()
        self.assertEqual(got, want, "gpuhost plan %s at %d columns differs from %s" % (name, columns, path))
        table = got[got.index("Whole job"):].splitlines()
        for line in table:
            self.assertLessEqual(len(line), columns, "a line wider than %d columns: %r" % (columns, line))

    def test_qlora_ranking_at_80_and_160_columns(self):
        self.check("qlora-ranking", 80)
        self.check("qlora-ranking", 160)

    def test_windows_prices_at_80_and_160_columns(self):
        self.check("yolo-windows", 80)
        self.check("yolo-windows", 160)

    def test_extreme_hours_keep_the_columns(self):
        self.check("extreme-hours", 160)
        self.check("extreme-hours", 80)

    def test_flag_errors_come_before_any_output(self):
        for args, text in ((["yolov8m", "--gpu-hours", "-5", "--reference-gpu", "T4"], "--gpu-hours must be a number from 0.001"),
                           (["yolov8m", "--gpu", "H100"], "name one: h100-sxm, h100-pcie, h100-nvl"),
                           (["yolov8m", "--gpu", "H10"], "gpuhost plan --list-gpus"),
                           (["sdxl-lora", "--gpu", "A100-40GB", "--max-batch"], "has no activation model in gpuhost"),
                           (["llama-3-8b", "--gpu-hours", "4", "--reference-gpu", "T4", "--top", "0"], "--top"),
                           (["llama-3-8b", "--framework", "axolotl"], "--framework")):
            proc = run(["plan"] + args)
            self.assertEqual(proc.returncode, 2, proc.stderr)
            self.assertEqual(proc.stdout, "", "output before the error %r" % proc.stderr)
            self.assertIn(text, proc.stderr)

    def test_list_gpus(self):
        proc = run(["plan", "--list-gpus", "--json"])
        self.assertEqual(proc.returncode, 0, proc.stderr)
        gpus = {g["key"]: g for g in json.loads(proc.stdout)}
        self.assertEqual(gpus["a100-sxm4-80gb"]["bf16_dense_tflops"], 312)
        self.assertEqual(gpus["t4"]["memory_gb"], 16)
        self.assertIn("h100-nvl", run(["plan", "--list-gpus"]).stdout)


if __name__ == "__main__":
    unittest.main()
