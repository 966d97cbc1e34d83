"""`gpuhost run` on two nodes, as users run a multi-node job: one gpuhost per node, each wrapping
`torchrun --nnodes=2 --node_rank=K` (Debian's torch 1.13, gloo on CPU, both "nodes" on
127.0.0.1 with their own gpuhost home), a real DDP trainer (trainers/ddp_trainer.py: the
all-reduce-the-save-flag pattern of doc/run-multinode.md), one checkpoint folder both nodes see.

What must hold: a notice on node 1 only reaches node 0 through the peer channel; both nodes'
workers are asked to save, both commit the same checkpoint written after the notice, both exit
75; a rerun of both agrees on that step and ends bit-identical to an uninterrupted run. A node
that dies (gpuhost and trainers SIGKILLed) gets the other node's trainer stopped within 30 s
(not after torchrun's minutes) and an exit 75 (outcome peer_lost); the rerun resumes from the
newest step committed on both nodes. Skipped without Debian's python3-torch."""
import json
import os
import signal
import subprocess
import time
import unittest

from gpuhost_test import BIN, IS_WINDOWS_BUILD, TMP, free_port_pair, have, is_root, needs, torch_available
from test_run_cli import Job, RunTestCase
from test_run_save_requests import DDP_TRAINER, reference

TORCHRUN = "/usr/bin/torchrun"


class Node(Job):
    """One node of the job: its own GPUHOST_HOME and logs; the checkpoint folder is node 0's."""

    def __init__(self, test, label, rank, shared_ck=None, netns=None, master="127.0.0.1", name=None):
        super().__init__(test, "multinode-%s-node%d" % (label, rank))
        if name:  # the job's name on every node (its remote copies are found by it)
            self.name = name
            self.job_dir = os.path.join(self.home, "jobs", name)
            self.journal_path = os.path.join(self.job_dir, "journal.jsonl")
        self.rank = rank
        self.trainer_extra = []
        self.netns = netns  # run inside this network namespace (ip netns exec)
        self.master = master
        if shared_ck:
            self.ck = shared_ck
        self.pid_dir = os.path.join(self.dir, "pids")
        os.makedirs(self.pid_dir, exist_ok=True)

    def torchrun(self, master_port, steps, every, step_time):
        # -r 9:1 -t 9:1: Debian's torch 1.13 on Python 3.11 cannot parse the default --redirects/--tee.
        return [TORCHRUN, "--nnodes=2", "--node_rank=%d" % self.rank, "--nproc_per_node=1", "-r", "9:1", "-t", "9:1",
                "--master_addr", self.master, "--master_port", str(master_port), DDP_TRAINER, "--steps", str(steps),
                "--every", str(every), "--step-time", str(step_time), "--out", self.ck, "--final-state", self.final,
                "--pid-dir", self.pid_dir] + self.trainer_extra + ["--resume", "{resume}"]

    def argv(self, flags, trainer, cloud=True):
        args = super().argv(flags, trainer, cloud)
        return ["ip", "netns", "exec", self.netns] + args if self.netns else args

    # Polled before gpuhost has made them: empty until then.
    def records(self, kind):
        return super().records(kind) if os.path.exists(self.journal_path) else []

    def stdout_log(self):
        return super().stdout_log() if os.path.exists(os.path.join(self.job_dir, "logs", "stdout.log")) else ""

    def trainer_pids(self):
        """The node's DDP worker and its torchrun agent (the worker's parent)."""
        pids = []
        for name in os.listdir(self.pid_dir):
            with open(os.path.join(self.pid_dir, name)) as f:
                worker = int(f.read().strip())
            pids.append(worker)
            try:
                with open("/proc/%d/stat" % worker) as f:
                    pids.append(int(f.read().rsplit(")", 1)[1].split()[1]))
            except FileNotFoundError:
                pass
        return pids


def wait_until(test, predicate, what, procs, timeout=240):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        for proc in procs:
            if proc.poll() is not None:
                test.fail("a node's gpuhost exited (%d) before %s" % (proc.returncode, what))
        time.sleep(0.05)
    test.fail("timed out waiting for %s" % what)


def wait_or_explain(test, procs, nodes, timeout, what):
    """Waits for every node's gpuhost; one still running at the deadline is stopped and the test
    fails with where each node stood: the process tree still alive under it (with the kernel's
    wait channel), then per node its exit, the kinds of its journal records, the last records in
    full, and the tails of its stderr and stdout (kept short: a hang report must fit a CI log)."""
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            tree = subprocess.run(["ps", "-eo", "pid,ppid,stat,wchan:24,etimes,args", "--forest"],
                                  capture_output=True, text=True).stdout
            alive = [line[:220] for line in tree.splitlines()
                     if any(node.dir in line or node.ck in line for node in nodes) or "PID" in line]
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            test.fail("%s did not end within %d s; still running then:\n%s\n" % (what, timeout, "\n".join(alive)) +
                      "\n".join(explain_node(node, p) for node, p in zip(nodes, procs)))


def explain_node(node, proc):
    journal = node.journal() if os.path.exists(node.journal_path) else []
    kinds = " ".join("%d:%s" % (r["seq"], r["type"]) for r in journal)
    last = "\n    ".join(json.dumps(r)[:240] for r in journal[-4:])
    trainer_err = os.path.join(node.job_dir, "logs", "stderr.log")
    agent = open(trainer_err, errors="replace").read()[-700:] if os.path.exists(trainer_err) else ""
    return "node %d (exit %s): %s\n    %s\n  stderr: %s\n  trainer stderr (torchrun's agent): %s\n  stdout: %s" % (
        node.rank, proc.returncode, kinds, last, node.stderr_of(node.runs)[-600:], agent, node.stdout_log()[-300:])


def committed(node, seq_id):
    return next(r for r in node.journal() if r["type"] == "checkpoint_committed" and "ck-%d" % r["seq"] == seq_id)


@unittest.skipIf(IS_WINDOWS_BUILD, "multi-node torch does not run on native Windows (test_run_windows.py: refused)")
@needs(torch_available(), "Debian's python3-torch for /usr/bin/python3")
class TwoNodes(RunTestCase):
    STEPS = 1200

    def nodes(self, label):
        zero = Node(self, label, 0)
        one = Node(self, label, 1, shared_ck=zero.ck)
        return zero, one

    def start_both(self, zero, one, steps, every, step_time, flags=(), env=None):
        port = free_port_pair()
        return (zero.start(list(flags), zero.torchrun(port, steps, every, step_time), env=env),
                one.start(list(flags), one.torchrun(port, steps, every, step_time), env=env))

    def rerun_both(self, zero, one, flags=(), env=None, storage="shared"):
        """Both nodes again, to the end: both exit 0; returns the step they agreed on."""
        procs = self.start_both(zero, one, self.STEPS, 0, 0, flags, env)
        wait_or_explain(self, procs, (zero, one), 300, "the rerun of both nodes")
        for node, proc in zip((zero, one), procs):
            self.assertEqual(proc.returncode, 0, node.stderr_of(node.runs) + node.summary())
        agreed = [node.records("resume_agreed")[-1]["step"] for node in (zero, one)]
        self.assertEqual(agreed[0], agreed[1])
        # Node 0 found node 1's storage probe in its folder, or did not.
        for node in (zero, one):
            self.assertEqual(node.records("resume_agreed")[-1]["storage"], storage, node.summary())
        # Node 0's rank 0 wrote the final weights: those of an uninterrupted run on one node.
        with open(zero.final, "rb") as f:
            self.assertEqual(f.read(), reference("torchrun", self.STEPS))
        return agreed[0]

    def test_a_notice_on_one_node_saves_both_at_the_same_step(self):
        zero, one = self.nodes("notice")
        procs = self.start_both(zero, one, self.STEPS, 0, 0.01)
        wait_until(self, lambda: "step 100 " in zero.stdout_log(), "DDP training on both nodes", procs)
        self.assertEqual([r["role"] for r in zero.records("peers_started")], ["leader"])
        self.assertEqual([r["role"] for r in one.records("peers_started")], ["follower"])
        procs[1].send_signal(signal.SIGTERM)  # the notice reaches node 1 only
        wait_or_explain(self, procs, (zero, one), 180, "the save after node 1's notice")
        for node, proc in zip((zero, one), procs):
            self.assertEqual(proc.returncode, 75, node.stderr_of(node.runs) + node.summary())
        self.assertEqual(one.records("notice")[0]["source"], "signal")
        peer_notice = zero.records("notice")[0]
        self.assertEqual(peer_notice["source"], "peer", zero.summary())
        self.assertIn("node 1: signal", peer_notice["detail"])
        # node 1's deadline, carried over: within a second of the one node 1 journalled
        self.assertEqual(peer_notice["deadline"][:19], one.records("notice")[0]["deadline"][:19])
        saved = []
        for node in (zero, one):
            self.assertEqual(node.records("save_requested")[0]["signalled"], 1, node.summary())
            saves = node.records("save_completed")
            self.assertEqual(len(saves), 1, node.summary())
            saved.append(committed(node, saves[0]["id"]))
            self.assertEqual(node.records("supervisor_stopped")[-1]["outcome"], "preempted")
        self.assertEqual(saved[0]["path"], saved[1]["path"], "both nodes saved the same checkpoint")
        self.assertEqual(saved[0]["step"], saved[1]["step"])
        # The ranks may save once more for the second node's request (the trainer's flag is set
        # again); the rerun takes the newest step both nodes have, in this shared folder the newest
        # checkpoint there, never an older one.
        on_disk = max(int(name[5:11]) for name in os.listdir(zero.ck) if name.startswith("ckpt-"))
        agreed = self.rerun_both(zero, one)
        self.assertGreaterEqual(agreed, saved[0]["step"])
        self.assertEqual(agreed, on_disk)

    @needs(have("moto_server", "aws"), "moto_server and the aws CLI (Debian's python3-moto and awscli)")
    def test_node_local_folders_mirror_by_node_and_restore_on_fresh_hosts(self):
        # Each node writes its own folder (local NVMe), its first rank saves there (HF's
        # save_on_each_node), and each gpuhost mirrors its node's files to the same S3 bucket.
        from moto_s3 import MotoS3
        moto_dir = os.path.join(TMP, "run-cli", "multinode-moto")
        os.makedirs(moto_dir, exist_ok=True)
        moto = MotoS3(moto_dir, "gpuhost-multinode")
        self.addCleanup(moto.stop)
        flags = ["--remote", moto.store_url()]
        job = "mn-local"

        def pair(label):
            nodes = (Node(self, label, 0, name=job), Node(self, label, 1, name=job))
            for node in nodes:
                node.trainer_extra = ["--save-on-each-node"]
            return nodes

        zero, one = pair("local")
        procs = self.start_both(zero, one, self.STEPS, 0, 0.01, flags, moto.env)
        wait_until(self, lambda: "step 100 " in zero.stdout_log(), "DDP training on both nodes", procs)
        for node in (zero, one):
            self.assertEqual(node.records("resume_agreed")[-1]["storage"], "node_local", node.summary())
        procs[1].send_signal(signal.SIGTERM)  # the notice reaches node 1 only
        wait_or_explain(self, procs, (zero, one), 180, "the save after node 1's notice")
        steps = []
        for node, proc in zip((zero, one), procs):
            self.assertEqual(proc.returncode, 75, node.stderr_of(node.runs) + node.summary())
            saves = node.records("save_completed")
            self.assertTrue(saves, node.summary())
            steps.append(committed(node, saves[0]["id"])["step"])
            self.assertTrue(node.records("mirror_deadline")[-1]["durable"], node.summary())
        self.assertEqual(steps[0], steps[1], "both nodes saved the same step")
        newest = [max(int(name[5:11]) for name in os.listdir(node.ck) if name.startswith("ckpt-")) for node in (zero, one)]
        self.assertEqual(newest[0], newest[1])
        # One uploader per node, each under its node's prefix; nothing under the job's own.
        for rank in (0, 1):
            manifests = [k for k in moto.keys("%s/node-%d/" % (job, rank)) if k.endswith("/manifest.json")]
            self.assertTrue(manifests, moto.keys(job + "/"))
        self.assertFalse([k for k in moto.keys(job + "/") if k.count("/") == 2 and k.endswith("/manifest.json")])
        # gpuhost ckpt reads one node's copies.
        listed = subprocess.run([BIN, "ckpt", "list", "--remote", moto.store_url(), "--job", job, "--node", "1", "--json"],
                                env=moto.env, capture_output=True, text=True, timeout=60)
        self.assertEqual(listed.returncode, 0, listed.stderr)
        self.assertIn(newest[1], [e["step"] for e in json.loads(listed.stdout)])

        # Replacement hosts: fresh homes, empty folders. Each restores its own node's copy of the
        # agreed step from S3 and both resume from it, ending bit-identical.
        zero, one = pair("local-fresh")
        agreed = self.rerun_both(zero, one, flags, moto.env, storage="node_local")
        self.assertEqual(agreed, newest[0])
        for node in (zero, one):
            restored = node.records("checkpoint_restored")
            self.assertEqual([r["step"] for r in restored], [agreed], node.summary())

    def test_a_node_that_dies_stops_the_other_promptly(self):
        zero, one = self.nodes("loss")
        procs = self.start_both(zero, one, self.STEPS, 100, 0.01)
        wait_until(self, lambda: zero.records("global_commit") and "step 250 " in zero.stdout_log(),
                   "a step committed on both nodes", procs)
        victims = one.trainer_pids()
        procs[1].send_signal(signal.SIGKILL)  # node 1 is gone: its gpuhost and its trainers
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        killed = time.monotonic()
        procs[1].wait(timeout=30)
        procs[0].wait(timeout=60)
        took = time.monotonic() - killed
        self.assertEqual(procs[0].returncode, 75, zero.stderr_of(zero.runs) + zero.summary())
        self.assertLess(took, 30, "node 0 noticed the loss after %.1f s" % took)
        stopped = zero.records("supervisor_stopped")[-1]
        self.assertEqual(stopped["outcome"], "peer_lost", zero.summary())
        self.assertIn("node 1", stopped["reason"])
        self.assertEqual(zero.records("peer_lost")[0]["node"], 1)
        status = zero.status()
        self.assertEqual(status["phase"], "preempted")
        self.assertIn("node 1", status["peer_lost"])
        # Node 0's view of every node: its own newest commit, node 1 lost.
        nodes = {n["node"]: n for n in status["nodes"]}
        self.assertTrue(nodes[0]["self"])
        own = [r["step"] for r in zero.records("checkpoint_committed")]
        self.assertEqual(nodes[0]["step"], max(own))
        self.assertEqual(nodes[1]["state"], "lost", status["nodes"])
        self.assertIn("node 1 step ", zero.gpuhost("status", zero.name).stdout)
        listed = zero.gpuhost("jobs").stdout
        self.assertRegex(listed, r"node 0 of 2 \(torchrun.*; node 1 lost", listed)
        # The newest step both nodes committed: at least the last global commit node 0 heard of
        # (node 1 may have committed a newer one just before it died), and in this shared folder
        # the newest checkpoint there, which both nodes validate again at the rerun.
        newest_global = zero.records("global_commit")[-1]["step"]
        on_disk = max(int(name[5:11]) for name in os.listdir(zero.ck) if name.startswith("ckpt-"))
        agreed = self.rerun_both(zero, one)
        self.assertGreaterEqual(agreed, newest_global)
        self.assertEqual(agreed, on_disk)
        print("node 0 stopped %.1f s after node 1 was killed" % took)

    @needs(is_root() and have("ip"), "root and iproute2, for network namespaces")
    def test_a_link_that_goes_down_stops_both_nodes_by_heartbeat(self):
        # Each node in a network namespace of its own, joined by a veth pair: the traffic stays in
        # namespaces this test made, and the link can go down without a reset reaching anyone.
        tag = "gh%d" % os.getpid()
        spaces = [tag + "n0", tag + "n1"]
        addresses = ["10.231.%d.1" % (os.getpid() % 250), "10.231.%d.2" % (os.getpid() % 250)]
        for space in spaces:
            subprocess.run(["ip", "netns", "add", space], check=True)
            self.addCleanup(subprocess.run, ["ip", "netns", "del", space])
        subprocess.run(["ip", "link", "add", tag + "v0", "netns", spaces[0], "type", "veth", "peer", "name", tag + "v1",
                        "netns", spaces[1]], check=True)
        for i, space in enumerate(spaces):
            subprocess.run(["ip", "-n", space, "addr", "add", addresses[i] + "/24", "dev", tag + "v%d" % i], check=True)
            subprocess.run(["ip", "-n", space, "link", "set", tag + "v%d" % i, "up"], check=True)
            subprocess.run(["ip", "-n", space, "link", "set", "lo", "up"], check=True)
        zero = Node(self, "link", 0, netns=spaces[0], master=addresses[0])
        one = Node(self, "link", 1, shared_ck=zero.ck, netns=spaces[1], master=addresses[0])
        token = {"GPUHOST_PEER_TOKEN": "t-%d" % os.getpid()}
        port = 29600 + os.getpid() % 200
        # Gloo would otherwise take the address the host name resolves to (127.0.0.1 here), as
        # on real multi-homed nodes; the interface is the user's setting, not gpuhost's.
        envs = [dict(token, GLOO_SOCKET_IFNAME=tag + "v%d" % i) for i in (0, 1)]
        procs = [node.start([], node.torchrun(port, self.STEPS, 100, 0.01), env=env) for node, env in zip((zero, one), envs)]
        wait_until(self, lambda: zero.records("global_commit") and "step 250 " in zero.stdout_log(),
                   "a step committed on both nodes", procs)
        subprocess.run(["ip", "-n", spaces[0], "link", "set", tag + "v0", "down"], check=True)
        down = time.monotonic()
        wait_or_explain(self, procs, (zero, one), 90, "both nodes' stop after the link went down")
        took = time.monotonic() - down
        for node, proc in zip((zero, one), procs):
            self.assertEqual(proc.returncode, 75, node.stderr_of(node.runs) + node.summary())
            stopped = node.records("supervisor_stopped")[-1]
            self.assertEqual(stopped["outcome"], "peer_lost", node.summary())
            self.assertIn("no heartbeat", node.records("peer_lost")[0]["reason"], node.summary())
        self.assertLess(took, 30, "the nodes stopped %.1f s after the link went down" % took)
        print("both nodes stopped %.1f s after the link went down" % took)
        subprocess.run(["ip", "-n", spaces[0], "link", "set", tag + "v0", "up"], check=True)
        on_disk = max(int(name[5:11]) for name in os.listdir(zero.ck) if name.startswith("ckpt-"))
        procs = [node.start([], node.torchrun(port, self.STEPS, 0, 0), env=env) for node, env in zip((zero, one), envs)]
        wait_or_explain(self, procs, (zero, one), 300, "the rerun of both nodes")
        for node, proc in zip((zero, one), procs):
            self.assertEqual(proc.returncode, 0, node.stderr_of(node.runs) + node.summary())
            self.assertEqual(node.records("resume_agreed")[-1]["step"], on_disk)
        with open(zero.final, "rb") as f:
            self.assertEqual(f.read(), reference("torchrun", self.STEPS))

    def test_a_trainer_that_fails_after_the_other_node_finished_is_not_restarted(self):
        # A torchrun started again would wait at its rendezvous for ranks that ended for good, so
        # node 0 ends failed at once, saying why, instead of restarting into a wait with no end.
        # SkyPilot's variables give the topology; the trainers are plain processes.
        zero, one = self.nodes("ended-peer")
        port = free_port_pair()
        env = {"SKYPILOT_NUM_NODES": "2", "SKYPILOT_NODE_IPS": "127.0.0.1\n127.0.0.1", "GPUHOST_PEER_PORT": str(port)}
        one_done = os.path.join(one.dir, "gpuhost-ended")
        wait_then_fail = ("import os, sys, time\n"
                          "deadline = time.monotonic() + 60\n"
                          "while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:\n"
                          "    time.sleep(0.05)\n"
                          "time.sleep(1)\n"  # node 1's bye reaches node 0
                          "sys.exit(3)\n")
        procs = [zero.start(["--max-restarts", "5"], ["python3", "-c", wait_then_fail, one_done],
                            env=dict(env, SKYPILOT_NODE_RANK="0")),
                 one.start(["--max-restarts", "5"], ["python3", "-c", "pass"], env=dict(env, SKYPILOT_NODE_RANK="1"))]
        wait_or_explain(self, procs[1:], (one,), 60, "node 1's finished trainer")
        self.assertEqual(procs[1].returncode, 0, one.stderr_of(one.runs) + one.summary())
        open(one_done, "w").close()
        wait_or_explain(self, procs[:1], (zero,), 60, "node 0 after its trainer failed")
        self.assertEqual(procs[0].returncode, 4, zero.stderr_of(zero.runs) + zero.summary())
        self.assertEqual(zero.records("restart_scheduled"), [], zero.summary())
        stopped = zero.records("supervisor_stopped")[-1]
        self.assertEqual(stopped["outcome"], "failed", zero.summary())
        self.assertIn("after node 1 ended (finished)", zero.records("gave_up")[-1]["reason"])
        self.assertIn("not restarted", zero.stderr_of(zero.runs))

    def test_a_network_leader_without_a_token_is_refused_before_anything_exists(self):
        node = Node(self, "token", 1)
        proc = node.run([], [TORCHRUN, "--nnodes=2", "--node_rank=1", "--master_addr", "10.0.0.5", DDP_TRAINER])
        self.assert_exit(proc, 2)
        self.assertIn("GPUHOST_PEER_TOKEN", proc.stderr)
        self.assertFalse(os.path.exists(node.job_dir), "nothing is created for a refused command")


if __name__ == "__main__":
    unittest.main()
