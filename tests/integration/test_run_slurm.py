"""`gpuhost run` under a real Slurm (Debian's slurm-wlm 22.05 and munge, slurm_cluster.py: two
`slurmd -N` nodes on 127.0.0.1), as users submit a multi-node job: an sbatch script in the shape
of examples/slurm/train.sbatch (`--requeue --open-mode=append --signal=USR1@...`, one gpuhost per
node as the srun task, each wrapping `torchrun --nnodes=2 --node_rank=$SLURM_NODEID` of the
unchanged DDP trainer), preempted by a job on a higher-priority partition (`PreemptMode=REQUEUE`,
`GraceTime`, `preempt_send_user_signal`).

What must hold: both nodes save the same step at the preemption signal and end preempted; node 0
requeues the job (`scontrol requeue`: a job whose steps end by themselves after the signal would
end COMPLETED and never come back); the requeued run sees SLURM_RESTART_COUNT=1, both nodes
resume from the saved step, and the final weights are bit-identical to an uninterrupted run.
Skipped without root, Debian's python3-torch or the Slurm packages (install-deps.sh installs
them)."""
import os
import shutil
import unittest

from gpuhost_test import BIN, IS_WINDOWS_BUILD, TMP, free_port_pair, needs, torch_available
from slurm_cluster import SlurmCluster, available
from test_run_cli import RunTestCase, read_journal
from test_run_multinode import TORCHRUN, wait_until
from test_run_save_requests import DDP_TRAINER, reference

STEPS = 1200


@unittest.skipIf(IS_WINDOWS_BUILD, "Slurm runs Linux nodes")
@needs(torch_available(), "Debian's python3-torch for /usr/bin/python3")
@needs(available(), "root and Debian's slurmctld, slurmd, slurm-client and munge")
class RealSlurm(RunTestCase):
    def setUp(self):
        self.base = os.path.join(TMP, "slurm-job")
        self.cluster = SlurmCluster(os.path.join(TMP, "slurm-cluster"))
        self.addCleanup(self.cluster.stop)  # also after a start that failed half-way
        self.cluster.start()
        shutil.rmtree(self.base, ignore_errors=True)
        os.makedirs(self.base)

    def journal(self, node):
        path = os.path.join(self.base, "node%d" % node, "jobs", "ck", "journal.jsonl")
        return read_journal(path) if os.path.exists(path) else []

    def stdout_log(self, node):
        path = os.path.join(self.base, "node%d" % node, "jobs", "ck", "logs", "stdout.log")
        if not os.path.exists(path):
            return ""
        with open(path, errors="replace") as f:
            return f.read()

    def test_a_preempted_job_saves_on_both_nodes_is_requeued_and_resumes(self):
        ck = os.path.join(self.base, "ck")
        final = os.path.join(self.base, "final.state")
        script = os.path.join(self.base, "train.sbatch")
        trainer = ("%s --nnodes=2 --node_rank=$SLURM_NODEID --nproc_per_node=1 -r 9:1 -t 9:1 --master_addr 127.0.0.1 "
                   "--master_port %d %s --steps %d --every 0 --step-time 0.02 --out %s --final-state %s "
                   "--resume {resume}" % (TORCHRUN, free_port_pair(), DDP_TRAINER, STEPS, ck, final))
        with open(script, "w") as f:
            f.write("#!/bin/bash\n"
                    "srun --kill-on-bad-exit=0 bash -c 'exec env GPUHOST_HOME=%s/node$SLURM_NODEID NO_COLOR=1 "
                    "%s run --checkpoints %s --settle 0.2 --cloud none --quiet -- %s'\n" % (self.base, BIN, ck, trainer))
        out = os.path.join(self.base, "job.out")
        job = self.cluster.sbatch("-p", "low", "-N2", "--ntasks-per-node=1", "--requeue", "--open-mode=append",
                                  "--signal=USR1@10", "--output", out, script)
        cluster = self.cluster

        class Running:
            def poll(self):
                state = cluster.job(job).get("JobState")
                return None if state in ("PENDING", "RUNNING", "CONFIGURING") else state

        wait_until(self, lambda: "step 100 " in self.stdout_log(0), "DDP training on both Slurm nodes", [Running()])
        # A job on the high partition needs both nodes: Slurm preempts ours (USR1 to every step).
        high = self.cluster.sbatch("-p", "high", "-N2", "--output", os.devnull, "--wrap", "sleep 1")
        requeued = self.cluster.wait_job(job, lambda j: j.get("Restarts") == "1" and j.get("JobState") == "PENDING",
                                         "requeued")
        self.assertEqual(requeued["Restarts"], "1")
        self.cluster.wait_job(high, lambda j: j.get("JobState") == "COMPLETED", "the preempting job done")
        # Slurm holds a requeued job back for about two minutes (research/06 §4.2): start it now.
        self.cluster.run("scontrol", "update", "JobId=%s" % job, "StartTime=now")
        done = self.cluster.wait_job(job, lambda j: j.get("JobState") in ("COMPLETED", "FAILED", "CANCELLED"),
                                     "finished", timeout=300)
        journals = [self.journal(0), self.journal(1)]
        with open(out, errors="replace") as f:
            output = f.read()[-3000:]
        summary = "\n".join("node %d: %s" % (i, [(r["type"], r.get("outcome", r.get("source", ""))) for r in j])
                            for i, j in enumerate(journals)) + "\n" + output
        self.assertEqual(done["JobState"], "COMPLETED", summary)

        saved = []
        for records in journals:
            stops = [r for r in records if r["type"] == "supervisor_stopped"]
            self.assertEqual([s["outcome"] for s in stops], ["preempted", "finished"], summary)
            saves = [r for r in records if r["type"] == "save_completed"]
            self.assertTrue(saves, "no save_completed on a node:\n" + summary)
            save = saves[0]
            saved.append(next(r for r in records if r["type"] == "checkpoint_committed" and "ck-%d" % r["seq"] == save["id"]))
            starts = [r for r in records if r["type"] == "supervisor_started"]
            self.assertEqual([s["topology"]["engine_restarts"] for s in starts], [0, 1], summary)
            # The newest step both nodes committed: the save, or a later one if the ranks saved
            # again for the second node's request (in this shared folder, the newest there).
            agreed = [r["step"] for r in records if r["type"] == "resume_agreed"][-1]
            on_disk = max(int(name[5:11]) for name in os.listdir(ck) if name.startswith("ckpt-"))
            self.assertGreaterEqual(agreed, saved[-1]["step"], summary)
            self.assertEqual(agreed, on_disk, summary)
        self.assertEqual(saved[0]["path"], saved[1]["path"], "both nodes saved the same checkpoint")
        requeue = [r for r in journals[0] if r["type"] == "engine_requeue"]
        self.assertEqual(len(requeue), 1, summary)
        self.assertTrue(requeue[0]["requeued"], requeue[0])
        self.assertEqual(requeue[0]["command"], ["scontrol", "requeue", job])
        self.assertFalse(any(r["type"] == "engine_requeue" for r in journals[1]), "only node 0 requeues")
        with open(final, "rb") as f:
            self.assertEqual(f.read(), reference("torchrun", STEPS))


if __name__ == "__main__":
    unittest.main()
