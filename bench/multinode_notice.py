#!/usr/bin/env python3
# Benchmark: a multi-node job under gpuhost (doc/run-multinode.md) against the same job on one
# node, on 127.0.0.1 with Debian's torch 1.13 (gloo, CPU).
#
#  1. notice -> saved on every node: the DDP trainer (tests/integration/trainers/ddp_trainer.py,
#     world size 2) once as `torchrun --nproc_per_node=2` under one gpuhost, once as two nodes of
#     `torchrun --nnodes=2 --nproc_per_node=1`, each under its own gpuhost, one shared checkpoint
#     folder. SIGTERM to (node 1's) gpuhost once training runs; the time from that node's notice
#     record to the last save_completed record over the nodes. The anchor is the single-node job:
#     the ratio is what the peer channel adds to a save. Also: the relay (node 1's notice record
#     to node 0's).
#  2. peer-loss detection: node 1's gpuhost SIGKILLed (its socket closes: detected at once), and
#     SIGSTOPped (a peer that goes silent, like a dead link: detected by the heartbeat timeout,
#     10 s); the time to node 0's peer_lost record, and to node 0's gpuhost exit.
#  3. per-node supervisor overhead: gpuhost's own CPU (supervisor_cpu_ms) per second of wall time
#     on each node against the single-node job's, with the trainers' CPU beside it.
#
# Usage: bench/multinode_notice.py [BUILD_DIR] [ROUNDS]   (default build/linux, 3)
import os
import signal
import socket
import statistics
import subprocess
import sys
import time

from run_journal import DEBIAN_PYTHON, REPO, TRAINERS, first, fresh_dir, gpuhost_bin, host_conditions, read_journal, when

DDP_TRAINER = os.path.join(TRAINERS, "ddp_trainer.py")
TORCHRUN = "/usr/bin/torchrun"
STEPS = 100000  # far more than a round runs: the notice ends it


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    def __init__(self, binary, work, name, ck):
        self.binary = binary
        self.home = os.path.join(work, name, "home")
        self.name = name
        self.ck = ck
        self.journal_path = os.path.join(self.home, "jobs", name, "journal.jsonl")
        os.makedirs(self.home)

    def start(self, torchrun_args, every):
        command = [self.binary, "run", "--name", self.name, "--checkpoints", self.ck, "--cloud", "none", "--quiet",
                   "--settle", "0.2", "--"] + [TORCHRUN, "-r", "9:1", "-t", "9:1"] + torchrun_args + [
                       DDP_TRAINER, "--steps", str(STEPS), "--every", str(every), "--step-time", "0.01", "--out",
                       self.ck, "--resume", "{resume}"]
        env = dict(os.environ, GPUHOST_HOME=self.home, NO_COLOR="1")
        self.log = open(os.path.join(self.home, "..", "gpuhost.log"), "wb")
        self.proc = subprocess.Popen(command, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        return self

    def journal(self):
        return read_journal(self.journal_path) if os.path.exists(self.journal_path) else []

    def wait_training(self, step=50, timeout=240):
        log = os.path.join(self.home, "jobs", self.name, "logs", "stdout.log")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if os.path.exists(log) and ("step %d " % step) in open(log, errors="replace").read():
                return
            if self.proc.poll() is not None:
                sys.exit("%s exited %d before training; see %s" % (self.name, self.proc.returncode, self.log.name))
            time.sleep(0.05)
        sys.exit("%s: no training within %d s" % (self.name, timeout))

    def wait(self, timeout=180):
        code = self.proc.wait(timeout=timeout)
        self.log.close()
        return code


def master_args(nnodes, rank, port):
    if nnodes == 1:
        return ["--nproc_per_node=2", "--master_addr", "127.0.0.1", "--master_port", str(port)]
    return ["--nnodes=2", "--node_rank=%d" % rank, "--nproc_per_node=1", "--master_addr", "127.0.0.1",
            "--master_port", str(port)]


def overhead(records, started_at):
    stopped = first(records, "supervisor_stopped")
    wall = when(stopped) - started_at
    return stopped["supervisor_cpu_ms"] / wall, stopped["child_cpu_ms"] / wall


def notice_round(binary, nnodes):
    work = fresh_dir("multinode_notice_%d" % nnodes)
    ck = os.path.join(work, "ck")
    port = free_port()
    nodes = [Node(binary, work, "node%d" % rank, ck).start(master_args(nnodes, rank, port), every=0)
             for rank in range(nnodes)]
    started = time.time()
    nodes[0].wait_training()
    nodes[-1].proc.send_signal(signal.SIGTERM)
    for node in nodes:
        if node.wait() != 75:
            sys.exit("%s did not end preempted; see %s" % (node.name, node.log.name))
    journals = [node.journal() for node in nodes]
    notice = first(journals[-1], "notice")
    saves = [first(records, "save_completed") for records in journals]
    if None in saves:
        sys.exit("a node saved nothing: %s" % [n.journal_path for n in nodes])
    relay = when(first(journals[0], "notice")) - when(notice) if nnodes > 1 else None
    return {"to_saved": max(when(s) for s in saves) - when(notice), "relay": relay,
            "overhead": [overhead(records, started) for records in journals]}


def loss_round(binary, how):
    work = fresh_dir("multinode_loss")
    ck = os.path.join(work, "ck")
    port = free_port()
    nodes = [Node(binary, work, "node%d" % rank, ck).start(master_args(2, rank, port), every=0) for rank in (0, 1)]
    nodes[0].wait_training()
    victim = nodes[1].proc
    hit = time.time()
    victim.send_signal(signal.SIGKILL if how == "kill" else signal.SIGSTOP)
    code = nodes[0].wait(timeout=120)
    exited = time.time()
    if how == "stop":
        victim.kill()
    victim.wait()
    # Node 1's trainers lose their peer and exit on their own (gloo); nothing of this round stays.
    subprocess.run(["pkill", "-KILL", "-f", os.path.join(work, "ck")], check=False)
    lost = first(nodes[0].journal(), "peer_lost")
    if code != 75 or lost is None:
        sys.exit("node 0 exited %d without peer_lost; see %s" % (code, nodes[0].log.name))
    return when(lost) - hit, exited - hit


def main(argv):
    binary = gpuhost_bin(argv)
    rounds = int(argv[2]) if len(argv) > 2 else 3
    for tool in (TORCHRUN, DEBIAN_PYTHON):
        if not os.path.exists(tool):
            sys.exit("needs Debian's python3-torch (%s)" % tool)
    print(host_conditions())
    print("gpuhost", subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.strip())
    single = [notice_round(binary, 1) for _ in range(rounds)]
    multi = [notice_round(binary, 2) for _ in range(rounds)]
    one = statistics.median(r["to_saved"] for r in single)
    two = statistics.median(r["to_saved"] for r in multi)
    print("notice -> saved on every node, median of %d: one node %.3f s, two nodes %.3f s, ratio %.2f" %
          (rounds, one, two, two / one))
    print("  relay node 1 -> node 0 (notice records): median %.1f ms" %
          (1000 * statistics.median(r["relay"] for r in multi)))
    kills = [loss_round(binary, "kill") for _ in range(rounds)]
    stops = [loss_round(binary, "stop") for _ in range(rounds)]
    for label, rows in (("killed", kills), ("silent (SIGSTOP)", stops)):
        print("peer %s: detected after median %.2f s, node 0 exited after %.2f s" %
              (label, statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)))
    sup_single = statistics.median(r["overhead"][0][0] for r in single)
    sup_multi = statistics.median(o[0] for r in multi for o in r["overhead"])
    child_single = statistics.median(r["overhead"][0][1] for r in single)
    child_multi = statistics.median(o[1] for r in multi for o in r["overhead"])
    print("supervisor CPU per wall second: one node %.1f ms/s (trainers %.0f ms/s); per node of two %.1f ms/s "
          "(trainers %.0f ms/s); ratio %.2f" % (sup_single, child_single, sup_multi, child_multi,
                                                sup_multi / sup_single))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
