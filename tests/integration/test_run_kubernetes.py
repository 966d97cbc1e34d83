"""`gpuhost run` as a Kubernetes container's entrypoint, with the pod's termination emulated at
the process boundary (there is no kubelet here): gpuhost is PID 1 of its own PID namespace with
its own /proc (`unshare --pid --fork --mount-proc`), KUBERNETES_SERVICE_HOST is set as in every
pod, and the "kubelet" sends SIGTERM to PID 1, then SIGKILL when terminationGracePeriodSeconds
is up (kubernetes.io pod lifecycle, research/06 §5.1).

What must hold: with the default 30 s grace the trainer's save lands and gpuhost exits 75 before
the SIGKILL; with a grace shorter than the next save (`--signal-deadline` set to the pod's
terminationGracePeriodSeconds), gpuhost stops the trainer itself before the kill and says which
steps are lost, exit 75, instead of dying mid-save with nothing said; a later start warns that the
last save took longer than the grace allows. Skipped without root and util-linux's unshare."""
import os
import signal
import threading
import time
import unittest

from fake_metadata_server import MetadataServer
from gpuhost_test import IS_WINDOWS_BUILD, have, is_root, needs
from test_run_cli import Job, RunTestCase

POD_ENV = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


class Pod(Job):
    """A Job whose gpuhost is PID 1 of a PID namespace, as in a container."""

    def argv(self, flags, trainer, cloud=True):
        return ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"] + super().argv(flags, trainer, cloud)

    def pid1(self, proc, timeout=30):
        """gpuhost's PID outside the namespace: the child unshare forked."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with open("/proc/%d/task/%d/children" % (proc.pid, proc.pid)) as f:
                    children = f.read().split()
                if children:
                    return int(children[0])
            except FileNotFoundError:
                pass
            time.sleep(0.05)
        self.test.fail("unshare started no child")

    def terminate(self, proc, grace):
        """The kubelet: SIGTERM to PID 1 now, SIGKILL after `grace` seconds if it is still there."""
        pid = self.pid1(proc)
        os.kill(pid, signal.SIGTERM)
        sent = time.monotonic()

        def kill_later():
            time.sleep(grace)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        killer = threading.Thread(target=kill_later, daemon=True)
        killer.start()
        return sent


@unittest.skipIf(IS_WINDOWS_BUILD, "Linux containers")
@needs(is_root() and have("unshare"), "root and unshare, for PID namespaces")
class PodTermination(RunTestCase):
    def test_the_save_lands_within_the_grace_and_a_short_grace_is_warned_about(self):
        pod = Pod(self, "pod-saves")
        proc = pod.start([], pod.stdlib(100000, every=0, step_time=0.02), env=POD_ENV)
        pod.wait_for_type("child_started", proc)
        log = os.path.join(pod.job_dir, "logs", "stdout.log")
        pod.wait_for(lambda records: os.path.exists(log) and "step 20\n" in pod.stdout_log(), "training", proc)
        sent = pod.terminate(proc, grace=30)
        proc.wait(timeout=60)
        took = time.monotonic() - sent
        self.assertEqual(proc.returncode, 75, pod.stderr_of(pod.runs) + pod.summary())
        self.assertLess(took, 30, "gpuhost was still running at the kubelet's SIGKILL")
        started = pod.records("supervisor_started")[0]
        self.assertEqual(started["topology"]["engine"], "kubernetes")
        notice = pod.records("notice")[0]
        self.assertEqual(notice["source"], "signal")
        self.assertEqual(len(pod.records("save_completed")), 1, pod.summary())
        self.assertIn("after saving", pod.records("supervisor_stopped")[-1]["reason"])
        # The same pod again with a grace shorter than that save plus the margin: said at the start.
        rerun = pod.start([], pod.stdlib(1, every=0), env=dict(POD_ENV, GPUHOST_SIGNAL_DEADLINE="5"))
        rerun.wait(timeout=60)
        self.assertEqual(rerun.returncode, 0, pod.stderr_of(pod.runs) + pod.summary())
        warning = pod.records("grace_too_short")
        self.assertEqual(len(warning), 1, pod.summary())
        self.assertEqual(warning[0]["signal_deadline_ms"], 5000)
        self.assertIn("terminationGracePeriodSeconds", pod.stderr_of(pod.runs))

    def test_a_grace_shorter_than_the_next_save_is_reported_as_lost_steps_before_the_kill(self):
        pod = Pod(self, "pod-short-grace")
        # A trainer that ignores save requests and saves every 400 steps (8 s): after one save, the
        # next is further away than an 8 s grace less the 5 s margin. It prints its loss lines,
        # which is how gpuhost knows the steps it reached.
        trainer = pod.stdlib(100000, every=400, step_time=0.02, extra=["--ignore-save-requests", "--print-metrics"])
        proc = pod.start(["--signal-deadline", "8"], trainer, env=POD_ENV)
        pod.wait_for_type("checkpoint_committed", proc, timeout=60)
        sent = pod.terminate(proc, grace=8)
        proc.wait(timeout=60)
        took = time.monotonic() - sent
        self.assertEqual(proc.returncode, 75, pod.stderr_of(pod.runs) + pod.summary())
        self.assertLess(took, 8, "gpuhost did not end before the kubelet's SIGKILL")
        timed_out = pod.records("save_timed_out")
        self.assertEqual(len(timed_out), 1, pod.summary())
        self.assertGreater(timed_out[0]["lost_steps"], 0)
        reason = pod.records("supervisor_stopped")[-1]["reason"]
        self.assertIn("without a new checkpoint", reason)
        self.assertIn("lost", pod.stderr_of(pod.runs))
        notice = pod.records("notice")[0]
        self.assertEqual(notice["source"], "signal")


    def test_a_sigterm_on_a_spot_node_asks_the_cloud_for_the_real_deadline_at_once(self):
        # The node is a spot instance being reclaimed: the cloud posted its notice (10 s left) and
        # the kubelet drains the pod with SIGTERM and a 30 s grace. The watcher polls only every
        # 10 minutes; the SIGTERM makes it ask at once, so gpuhost works to the cloud's deadline,
        # not the pod's.
        server = MetadataServer(self, "aws")
        pod = Pod(self, "pod-spot")
        trainer = pod.stdlib(100000, every=0, step_time=0.02, extra=["--ignore-save-requests"])
        proc = pod.start(["--cloud", "aws", "--metadata-endpoint", server.url, "--poll-interval", "600s"], trainer,
                         env=POD_ENV)
        pod.wait_for(lambda records: server.log(), "the watcher's first poll", proc)
        pod.wait_for_type("child_started", proc)
        server.control("notice", {"in_seconds": 10})
        sent = pod.terminate(proc, grace=30)
        proc.wait(timeout=60)
        took = time.monotonic() - sent
        self.assertEqual(proc.returncode, 75, pod.stderr_of(pod.runs) + pod.summary())
        sources = [r["source"] for r in pod.records("notice")]
        self.assertEqual(sources[0], "signal", pod.summary())
        self.assertIn("aws", sources, "the cloud's notice was not read after the SIGTERM: " + pod.summary())
        # A trainer that never saves is stopped at the cloud's deadline less the 5 s margin, long
        # before the pod's grace less the margin (25 s) would have stopped it.
        self.assertLess(took, 20, "gpuhost worked to the pod's grace, not the cloud's deadline")


if __name__ == "__main__":
    unittest.main()
