"""gpuhost plan end to end (Linux, and the Windows build under Wine): memory estimates, ranking
with --json, bad input with the documented exit codes."""
import json
import os
import unittest

from gpuhost_test import GpuhostTestCase, host_path, run, tmp_dir


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


if __name__ == "__main__":
    unittest.main()
