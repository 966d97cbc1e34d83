"""SM4 checkpoints cross the OS boundary: the Windows build (gpuhost.exe under Wine: CNG, and
libgcrypt-20.dll for SM3/SM4) and the Linux build (OpenSSL 3.0) write and read one store, a
file:// folder both see (Wine maps / to Z:).

- encrypted with `--encrypt sm4` on Windows, pulled on Linux bit-identical; and back;
- a changed byte in a stored object, or another key, is refused by `ckpt verify` and `pull` on
  both, and a refused pull leaves nothing;
- `sm4-gcm`, which libgcrypt has and Debian 12's OpenSSL 3.0 has not, written on Windows is
  refused on Linux naming the suite, never misread; `sm4` is the suite both read;
- gpuhost.exe copied without its DLLs still runs: SM4 is refused before anything is uploaded,
  naming libgcrypt-20.dll, and AES-256-GCM (CNG) still works.

Runs in the Windows build's suite (GPUHOST_WINE) and needs the Linux build's gpuhost
(GPUHOST_LINUX_BIN; scripts/test.sh builds Linux first). Standard library only."""
import json
import os
import shutil
import struct
import subprocess
import unittest

from gpuhost_test import BIN, IS_WINDOWS_BUILD, TMP, WINE, host_path, needs

LINUX_BIN = os.environ.get("GPUHOST_LINUX_BIN", "")
KEY_HEX = "5f0c3a9e1b7d2468ace013579bdf2468ace013579bdf02468ace13579bdf0246"
OTHER_KEY_HEX = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f1"
ROOT = os.path.join(TMP, "sm4-cross-os")


def safetensors(path, elements, seed):
    """A valid safetensors file of one F32 tensor (`elements` values) with deterministic bytes."""
    header = json.dumps({"w": {"dtype": "F32", "shape": [elements], "data_offsets": [0, 4 * elements]}}).encode()
    header += b" " * (-len(header) % 8)
    data = bytearray()
    state = seed
    while len(data) < 4 * elements:
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        data += struct.pack("<Q", state)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header)) + header + bytes(data[:4 * elements]))


class Side:
    """One OS's gpuhost: how it is run and how it names paths."""

    def __init__(self, name, command, windows):
        self.name = name
        self.command = command
        self.windows = windows

    def path(self, path):
        return "Z:" + path.replace("/", "\\") if self.windows else path

    def url(self, store):
        return "file:///" + ("Z:" + store if self.windows else store.lstrip("/"))

    def ckpt(self, store, job, key, *args):
        full = self.command + ["ckpt"] + list(args) + ["--remote", self.url(store), "--job", job,
                                                        "--encryption-key-file", self.path(key)]
        return subprocess.run(full, capture_output=True, text=True, timeout=300, env=dict(os.environ, NO_COLOR="1"))


@unittest.skipUnless(IS_WINDOWS_BUILD, "runs both builds: the Windows build's suite")
@needs(os.path.exists(LINUX_BIN), "the Linux build's gpuhost (GPUHOST_LINUX_BIN=%s): build the linux preset first" % LINUX_BIN)
class Sm4AcrossOperatingSystems(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        shutil.rmtree(ROOT, ignore_errors=True)
        os.makedirs(ROOT)
        cls.windows = Side("Windows", [WINE, BIN], True)
        cls.linux = Side("Linux", [LINUX_BIN], False)
        cls.key = os.path.join(ROOT, "key.hex")
        cls.other_key = os.path.join(ROOT, "other.hex")
        with open(cls.key, "w") as f:
            f.write(KEY_HEX + "\n")
        with open(cls.other_key, "w") as f:
            f.write(OTHER_KEY_HEX + "\n")

    def store(self, label):
        path = os.path.join(ROOT, label, "store")
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
        os.makedirs(path)
        return path

    def checkpoint(self, label, step, megabytes):
        """A checkpoint file of about `megabytes` MB: several of the format's 4 MiB chunks."""
        directory = os.path.join(ROOT, label, "ck")
        os.makedirs(directory, exist_ok=True)
        path = os.path.join(directory, "step-%d.safetensors" % step)
        safetensors(path, megabytes * 250_000 + 7, seed=step)
        return path

    def push(self, side, store, job, path, suite="sm4"):
        proc = side.ckpt(store, job, self.key, "push", side.path(path), "--encrypt", suite, "--json")
        self.assertEqual(proc.returncode, 0, "%s push: %s%s" % (side.name, proc.stdout, proc.stderr))
        return json.loads(proc.stdout)

    def pull(self, side, store, job, remote_id, label):
        out = os.path.join(ROOT, label, "pulled-by-" + side.name)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        proc = side.ckpt(store, job, self.key, "pull", remote_id, "--to", side.path(out), "--json")
        self.assertEqual(proc.returncode, 0, "%s pull: %s%s" % (side.name, proc.stdout, proc.stderr))
        return out

    def stored_files(self, store, job, remote_id):
        directory = os.path.join(store, job, remote_id, "files")
        found = [os.path.join(d, f) for d, _, files in os.walk(directory) for f in files]
        self.assertTrue(found, "no stored objects under %s" % directory)
        return found

    def assert_crossing(self, writer, reader, label):
        store = self.store(label)
        source = self.checkpoint(label, 300, 9)
        pushed = self.push(writer, store, "cross", source)
        self.assertEqual(pushed["encryption"], "sm4-ctr-hmac-sm3")
        manifest_path = os.path.join(store, "cross", pushed["remote_id"], "manifest.json")
        with open(manifest_path) as f:
            manifest = json.load(f)
        self.assertEqual(manifest["encryption"]["suite"], "sm4-ctr-hmac-sm3")
        self.assertTrue(manifest["mac"].startswith("hmac-sm3:"), manifest["mac"])
        with open(source, "rb") as f:
            plain = f.read()
        for stored in self.stored_files(store, "cross", pushed["remote_id"]):
            with open(stored, "rb") as f:
                ciphertext = f.read()
            self.assertNotIn(plain[-4096:], ciphertext)
            self.assertNotIn(plain[1024:4096], ciphertext)
        out = self.pull(reader, store, "cross", pushed["remote_id"], label)
        with open(os.path.join(out, os.path.basename(source)), "rb") as f:
            self.assertEqual(f.read(), plain, "%s -> %s is not bit-identical" % (writer.name, reader.name))
        for side in (writer, reader):
            verified = side.ckpt(store, "cross", self.key, "verify", "--json")
            self.assertEqual(verified.returncode, 0, "%s verify: %s%s" % (side.name, verified.stdout, verified.stderr))

    def test_encrypted_on_windows_restores_bit_identical_on_linux(self):
        self.assert_crossing(self.windows, self.linux, "win-to-linux")

    def test_encrypted_on_linux_restores_bit_identical_on_windows(self):
        self.assert_crossing(self.linux, self.windows, "linux-to-win")

    def test_a_changed_chunk_or_another_key_is_refused_on_both(self):
        store = self.store("tamper")
        pushed = self.push(self.windows, store, "tamper", self.checkpoint("tamper", 400, 5))
        for side in (self.windows, self.linux):
            other = side.ckpt(store, "tamper", self.other_key, "verify", "--json")
            self.assertEqual(other.returncode, 1, "%s: %s%s" % (side.name, other.stdout, other.stderr))
            self.assertIn("not with this key", other.stdout + other.stderr)
        stored = self.stored_files(store, "tamper", pushed["remote_id"])[0]
        with open(stored, "r+b") as f:
            f.seek(4 * 1024 * 1024 + 100_000)  # inside the second 4 MiB chunk
            byte = f.read(1)
            f.seek(-1, os.SEEK_CUR)
            f.write(bytes([byte[0] ^ 0x01]))
        for side in (self.windows, self.linux):
            verified = side.ckpt(store, "tamper", self.key, "verify", "--json")
            self.assertEqual(verified.returncode, 1, "%s: %s%s" % (side.name, verified.stdout, verified.stderr))
            # The manifest's SHA-256 of the stored part catches it before the chunk's HMAC-SM3 would.
            self.assertRegex(verified.stdout + verified.stderr, "changed after upload|failed authentication")
            out = os.path.join(ROOT, "tamper", "pulled-by-" + side.name)
            shutil.rmtree(out, ignore_errors=True)
            os.makedirs(out)
            pulled = side.ckpt(store, "tamper", self.key, "pull", pushed["remote_id"], "--to", side.path(out))
            self.assertNotEqual(pulled.returncode, 0, side.name)
            self.assertEqual(os.listdir(out), [], "%s left a half-verified checkpoint" % side.name)

    def test_sm4_gcm_from_windows_is_refused_on_linux_naming_the_suite(self):
        store = self.store("gcm")
        source = self.checkpoint("gcm", 500, 1)
        pushed = self.push(self.windows, store, "gcm", source, suite="sm4-gcm")
        self.assertEqual(pushed["encryption"], "sm4-gcm")
        out = self.pull(self.windows, store, "gcm", pushed["remote_id"], "gcm")
        with open(os.path.join(out, os.path.basename(source)), "rb") as f, open(source, "rb") as g:
            self.assertEqual(f.read(), g.read())
        verified = self.linux.ckpt(store, "gcm", self.key, "verify", "--json")
        self.assertNotEqual(verified.returncode, 0, verified.stdout)
        self.assertIn("sm4-gcm", verified.stdout + verified.stderr)
        # Writing it on Linux is refused before anything is uploaded.
        refused = self.linux.ckpt(store, "gcm-linux", self.key, "push", source, "--encrypt", "sm4-gcm")
        self.assertEqual(refused.returncode, 2, refused.stderr)
        self.assertIn("SM4-GCM", refused.stderr)
        self.assertFalse(os.path.exists(os.path.join(store, "gcm-linux")))

    def test_without_its_dlls_gpuhost_exe_refuses_sm4_naming_the_dll_and_aes_still_works(self):
        alone = os.path.join(ROOT, "alone")
        shutil.rmtree(alone, ignore_errors=True)
        os.makedirs(alone)
        shutil.copy(BIN, alone)
        side = Side("Windows without libgcrypt", [WINE, os.path.join(alone, os.path.basename(BIN))], True)
        store = self.store("no-dll")
        source = self.checkpoint("no-dll", 600, 1)
        refused = side.ckpt(store, "no-dll", self.key, "push", side.path(source), "--encrypt", "sm4")
        self.assertEqual(refused.returncode, 2, refused.stdout + refused.stderr)
        self.assertIn("libgcrypt-20.dll", refused.stderr)
        self.assertIn("AES-256-GCM", refused.stderr)
        self.assertEqual(os.listdir(store), [])
        aes = side.ckpt(store, "no-dll", self.key, "push", side.path(source), "--encrypt", "aes-256-gcm", "--json")
        self.assertEqual(aes.returncode, 0, aes.stdout + aes.stderr)
        self.assertEqual(json.loads(aes.stdout)["encryption"], "aes-256-gcm")


if __name__ == "__main__":
    unittest.main()
