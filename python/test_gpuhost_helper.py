"""Unit tests for gpuhost_helper (standard library unittest):
    python3 -m unittest -v test_gpuhost_helper      (from this folder)"""
import os
import signal
import stat
import tempfile
import unittest
from unittest import mock

import gpuhost_helper

HAS_SIGUSR1 = hasattr(signal, "SIGUSR1")


class ResumePath(unittest.TestCase):
    def test_returns_the_environment_value(self):
        with mock.patch.dict(os.environ, {"GPUHOST_RESUME_FROM": "/ckpt/step-10.pt"}):
            self.assertEqual(gpuhost_helper.resume_path(), "/ckpt/step-10.pt")

    def test_is_none_when_unset_or_empty(self):
        with mock.patch.dict(os.environ, {}, clear=True):
            self.assertIsNone(gpuhost_helper.resume_path())
        with mock.patch.dict(os.environ, {"GPUHOST_RESUME_FROM": ""}):
            self.assertIsNone(gpuhost_helper.resume_path())


class SaveRequestsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.request = os.path.join(self.dir.name, "save-request")
        self.env = mock.patch.dict(os.environ, {"GPUHOST_SAVE_REQUEST": self.request})
        self.env.start()
        self.requests = gpuhost_helper.SaveRequests()

    def tearDown(self):
        self.requests.restore()
        self.env.stop()
        self.dir.cleanup()

    def test_nothing_is_pending_before_a_request(self):
        self.assertFalse(self.requests.pending())
        self.assertFalse(self.requests.stop_requested())

    @unittest.skipUnless(HAS_SIGUSR1, "POSIX save signal")
    def test_a_save_signal_is_pending_exactly_once(self):
        os.kill(os.getpid(), signal.SIGUSR1)
        self.assertTrue(self.requests.pending())
        self.assertFalse(self.requests.pending())
        os.kill(os.getpid(), signal.SIGUSR1)
        self.assertTrue(self.requests.pending())

    def test_the_request_file_is_pending_once_and_deleted(self):
        with open(self.request, "w"):
            pass
        self.assertTrue(self.requests.pending())
        self.assertFalse(os.path.exists(self.request))
        self.assertFalse(self.requests.pending())

    @unittest.skipUnless(HAS_SIGUSR1, "POSIX save signal")
    def test_a_signal_and_the_file_together_count_once(self):
        with open(self.request, "w"):
            pass
        os.kill(os.getpid(), signal.SIGUSR1)
        self.assertTrue(self.requests.pending())
        self.assertFalse(self.requests.pending())

    @unittest.skipUnless(HAS_SIGUSR1, "POSIX signals to self")
    def test_sigterm_sets_stop_requested_instead_of_ending_the_process(self):
        os.kill(os.getpid(), signal.SIGTERM)
        self.assertTrue(self.requests.stop_requested())
        self.assertTrue(self.requests.stop_requested())
        self.assertFalse(self.requests.pending())

    def test_restore_puts_the_previous_handlers_back(self):
        self.requests.restore()
        self.assertIs(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)
        if HAS_SIGUSR1:
            self.assertIs(signal.getsignal(signal.SIGUSR1), signal.SIG_DFL)

    def test_without_the_environment_variable_no_file_is_watched(self):
        with mock.patch.dict(os.environ, {}, clear=True):
            requests = gpuhost_helper.SaveRequests(install_signals=False, handle_stop=False)
        self.assertIsNone(requests.request_file)
        self.assertFalse(requests.pending())

    def test_handle_stop_false_leaves_sigterm_alone(self):
        self.requests.restore()
        requests = gpuhost_helper.SaveRequests(handle_stop=False)
        try:
            self.assertIs(signal.getsignal(signal.SIGTERM), signal.SIG_DFL)
        finally:
            requests.restore()


class AtomicSave(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "ckpt-000010.pt")

    def tearDown(self):
        self.dir.cleanup()

    def entries(self):
        return sorted(os.listdir(self.dir.name))

    def read(self, path=None):
        with open(path or self.path, "rb") as f:
            return f.read()

    def test_writes_through_a_file_object(self):
        gpuhost_helper.atomic_save(self.path, lambda f: f.write(b"weights"))
        self.assertEqual(self.read(), b"weights")
        self.assertEqual(self.entries(), ["ckpt-000010.pt"])

    def test_replaces_an_existing_file(self):
        gpuhost_helper.atomic_save(self.path, lambda f: f.write(b"old"))
        gpuhost_helper.atomic_save(self.path, lambda f: f.write(b"new"))
        self.assertEqual(self.read(), b"new")
        self.assertEqual(self.entries(), ["ckpt-000010.pt"])

    def test_an_exception_leaves_the_old_file_and_no_temporary(self):
        gpuhost_helper.atomic_save(self.path, lambda f: f.write(b"old"))

        def failing_writer(f):
            f.write(b"half of the new")
            raise RuntimeError("disk full")

        with self.assertRaisesRegex(RuntimeError, "disk full"):
            gpuhost_helper.atomic_save(self.path, failing_writer)
        self.assertEqual(self.read(), b"old")
        self.assertEqual(self.entries(), ["ckpt-000010.pt"])

    def test_an_exception_on_a_first_save_leaves_nothing(self):
        with self.assertRaises(ValueError):
            gpuhost_helper.atomic_save(self.path, lambda f: (f.write(b"x"), int("not a number")))
        self.assertEqual(self.entries(), [])

    def test_takes_path_writes_a_hidden_temporary_in_the_same_directory(self):
        seen = []

        def writer(temp):
            seen.append(temp)
            with open(temp, "wb") as f:
                f.write(b"tensors")

        gpuhost_helper.atomic_save(self.path, writer, takes_path=True)
        self.assertEqual(self.read(), b"tensors")
        temp_name = os.path.basename(seen[0])
        self.assertEqual(os.path.dirname(seen[0]), self.dir.name)
        self.assertTrue(temp_name.startswith(".ckpt-000010.pt.") and temp_name.endswith(".tmp"), temp_name)
        self.assertEqual(self.entries(), ["ckpt-000010.pt"])

    def test_takes_path_exception_removes_the_temporary(self):
        def writer(temp):
            with open(temp, "wb") as f:
                f.write(b"partial")
            raise OSError("killed")

        with self.assertRaises(OSError):
            gpuhost_helper.atomic_save(self.path, writer, takes_path=True)
        self.assertEqual(self.entries(), [])

    @unittest.skipIf(os.name == "nt", "POSIX permissions")
    def test_the_file_mode_follows_the_umask(self):
        previous = os.umask(0o022)
        try:
            gpuhost_helper.atomic_save(self.path, lambda f: f.write(b"x"))
        finally:
            os.umask(previous)
        self.assertEqual(stat.S_IMODE(os.stat(self.path).st_mode), 0o644)


class AtomicSaveDir(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "checkpoint-500")

    def tearDown(self):
        self.dir.cleanup()

    @staticmethod
    def writer(content, seen=None):
        def write(temp):
            if seen is not None:
                seen.append(temp)
            os.makedirs(os.path.join(temp, "sub"))
            for name in ("model.safetensors", "trainer_state.json", os.path.join("sub", "rng.pth")):
                with open(os.path.join(temp, name), "w") as f:
                    f.write(content)
        return write

    def test_writes_the_directory_under_a_hidden_temporary_name_first(self):
        seen = []
        gpuhost_helper.atomic_save_dir(self.path, self.writer("v1", seen))
        self.assertEqual(sorted(os.listdir(self.path)), ["model.safetensors", "sub", "trainer_state.json"])
        temp_name = os.path.basename(seen[0])
        self.assertTrue(temp_name.startswith(".checkpoint-500.") and temp_name.endswith(".tmp"), temp_name)
        self.assertEqual(os.listdir(self.dir.name), ["checkpoint-500"])

    def test_replaces_an_existing_directory(self):
        gpuhost_helper.atomic_save_dir(self.path, self.writer("v1"))
        gpuhost_helper.atomic_save_dir(self.path + "/", self.writer("v2"))
        with open(os.path.join(self.path, "sub", "rng.pth")) as f:
            self.assertEqual(f.read(), "v2")
        self.assertEqual(os.listdir(self.dir.name), ["checkpoint-500"])

    def test_an_exception_leaves_the_old_directory_and_no_temporary(self):
        gpuhost_helper.atomic_save_dir(self.path, self.writer("v1"))

        def failing(temp):
            self.writer("v2")(temp)
            raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            gpuhost_helper.atomic_save_dir(self.path, failing)
        with open(os.path.join(self.path, "model.safetensors")) as f:
            self.assertEqual(f.read(), "v1")
        self.assertEqual(os.listdir(self.dir.name), ["checkpoint-500"])


if __name__ == "__main__":
    unittest.main()


TORCHRUN = "/usr/bin/torchrun"
_RANKS_SCRIPT = r'''
import os, sys
sys.path.insert(0, os.environ["HELPER_DIR"])
import torch.distributed as dist
import gpuhost_helper
dist.init_process_group("gloo")
rank = dist.get_rank()
# Only rank 1 had a request at step 2: every rank must see it there, and nowhere else.
seen = [gpuhost_helper.any_rank(rank == 1 and step == 2) for step in range(4)]
print("rank %d %s" % (rank, seen), flush=True)
dist.destroy_process_group()
'''


@unittest.skipUnless(os.path.exists(TORCHRUN), "needs Debian's python3-torch (torchrun)")
class AnyRank(unittest.TestCase):
    def test_one_ranks_request_is_every_ranks(self):
        import socket
        import subprocess

        with tempfile.TemporaryDirectory() as tmp:
            script = os.path.join(tmp, "ranks.py")
            with open(script, "w") as f:
                f.write(_RANKS_SCRIPT)
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            env = dict(os.environ, HELPER_DIR=os.path.dirname(os.path.abspath(gpuhost_helper.__file__)))
            # -r 9:1 -t 9:1: Debian's torch 1.13 on Python 3.11 cannot parse the default redirects.
            proc = subprocess.run([TORCHRUN, "--nproc_per_node=2", "-r", "9:1", "-t", "9:1", "--master_addr",
                                   "127.0.0.1", "--master_port", str(port), script], env=env,
                                  capture_output=True, text=True, timeout=180)
            self.assertEqual(proc.returncode, 0, proc.stderr[-3000:])
            for rank in (0, 1):
                self.assertIn("rank %d [False, False, True, False]" % rank, proc.stdout, proc.stderr[-2000:])

    def test_one_process_returns_the_flag(self):
        class NotInitialised:
            @staticmethod
            def is_available():
                return True

            @staticmethod
            def is_initialized():
                return False

        self.assertTrue(gpuhost_helper.any_rank(True, NotInitialised))
        self.assertFalse(gpuhost_helper.any_rank(0, NotInitialised))
