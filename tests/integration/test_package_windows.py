"""The Windows packages as a user installs them: the MSI built with wixl (deploy/windows/make-msi.sh),
its tables read back with msiinfo, installed with `msiexec /i /qn` under Wine, run from Program
Files (`doctor --json`, and an SM4 push that needs the DLLs installed beside gpuhost.exe),
registered for Add/Remove Programs, and removed with `msiexec /x` leaving nothing; and the
portable zip from cpack, unpacked and run.

Runs in the Windows build's suite (GPUHOST_WINE). Standard library only."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
import zipfile

from gpuhost_test import BIN, IS_WINDOWS_BUILD, TMP, WINE, have, needs

BUILD = os.path.dirname(os.path.abspath(BIN))
SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PREFIX = os.environ.get("GPUHOST_WINEPREFIX", os.path.join(os.environ.get("HOME", "/tmp"), ".cache", "gpuhost-wine"))
PROGRAM_DIR = os.path.join(PREFIX, "drive_c", "Program Files", "gpuhost")
UNINSTALL_KEY = r"HKLM\Software\Microsoft\Windows\CurrentVersion\Uninstall"
KEY_HEX = "5f0c3a9e1b7d2468ace013579bdf2468ace013579bdf02468ace13579bdf0246"
PACKAGED = ["gpuhost.exe", "libgcrypt-20.dll", "libgpg-error-0.dll", "README.md", "licenses/LGPL-2.1.txt",
            "licenses/libgcrypt.txt", "licenses/libgpg-error.txt", "doc/encryption.md", "doc/exit-codes.md",
            "deploy/prometheus.yml"]


def project_version():
    with open(os.path.join(SOURCE, "CMakeLists.txt")) as f:
        return re.search(r"project\(gpuhost VERSION ([0-9.]+)", f.read()).group(1)


def wine(args, timeout=180):
    return subprocess.run([WINE] + list(args), capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, NO_COLOR="1"))


def windows_path(path):
    return "Z:" + path.replace("/", "\\")


def is_stripped(exe):
    """No symbol table left (the Release build has no DWARF to begin with)."""
    out = subprocess.run(["x86_64-w64-mingw32-objdump", "-t", exe], capture_output=True, text=True).stdout
    return "no symbols" in out


def tables(msi):
    return subprocess.run(["msiinfo", "tables", msi], capture_output=True, text=True, check=True).stdout.split()


def export(msi, table):
    """Rows of an MSI table as dicts (msiinfo export: a header, two type lines, then rows)."""
    lines = subprocess.run(["msiinfo", "export", msi, table], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    names = lines[0].split("\t")
    return [dict(zip(names, line.split("\t"))) for line in lines[3:] if line]


def safetensors(path):
    header = b'{"w":{"dtype":"F32","shape":[4096],"data_offsets":[0,16384]}}'
    header += b" " * (-len(header) % 8)
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header + bytes(range(256)) * 64)


@unittest.skipUnless(IS_WINDOWS_BUILD, "the Windows packages: the Windows build's suite")
@needs(have("wixl") and have("msiinfo") and have("cpack"), "wixl and msiinfo (Debian: wixl, msitools) and cpack")
class WindowsPackages(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="package-windows-", dir=TMP if os.path.isdir(TMP) else None)
        cls.msi = os.path.join(cls.dir, "gpuhost-%s-x64.msi" % project_version())
        proc = subprocess.run([os.path.join(SOURCE, "deploy", "windows", "make-msi.sh"), BUILD, SOURCE,
                               project_version(), cls.msi], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_msi_tables_carry_the_files_the_version_and_a_stable_upgrade_code(self):
        names = tables(self.msi)
        for table in ("File", "Component", "Directory", "Feature", "Upgrade", "Property"):
            self.assertIn(table, names)
        files = {row["FileName"].split("|")[-1] for row in export(self.msi, "File")}
        for want in PACKAGED:
            self.assertIn(os.path.basename(want), files)
        properties = {row["Property"]: row["Value"] for row in export(self.msi, "Property")}
        self.assertEqual(properties["ProductName"], "gpuhost")
        self.assertEqual(properties["ProductVersion"], project_version())
        # A newer MSI must find and replace this one: the UpgradeCode is fixed in gpuhost.wxs.
        self.assertEqual(properties["UpgradeCode"], "{6B0E5E2C-8F1D-4B8A-9C67-2A41D0C7F3A5}")
        self.assertEqual(properties["ALLUSERS"], "1")
        directories = {row["Directory"]: row for row in export(self.msi, "Directory")}
        self.assertEqual(directories["INSTALLDIR"]["Directory_Parent"], "ProgramFiles64Folder")
        summary = subprocess.run(["msiinfo", "suminfo", self.msi], capture_output=True, text=True, check=True).stdout
        self.assertIn("Template: x64;", summary)
        print("\nMSI %d bytes" % os.path.getsize(self.msi), file=sys.stderr)

    def test_msiexec_installs_a_gpuhost_that_runs_and_uninstalls_leaving_nothing(self):
        wine(["msiexec", "/x", windows_path(self.msi), "/qn"])  # a leftover of an interrupted run
        proc = wine(["msiexec", "/i", windows_path(self.msi), "/qn"])
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        try:
            for want in PACKAGED:
                self.assertTrue(os.path.exists(os.path.join(PROGRAM_DIR, want)), want)
            installed = os.path.join(PROGRAM_DIR, "gpuhost.exe")
            self.assertTrue(is_stripped(installed))
            self.assertLess(os.path.getsize(installed), os.path.getsize(BIN))
            doctor = wine([r"C:\Program Files\gpuhost\gpuhost.exe", "doctor", "--json"])
            self.assertIn(doctor.returncode, (0, 1), doctor.stderr)  # 1: findings on this GPU-less host
            report = json.loads(doctor.stdout)
            self.assertEqual(report["os"], "windows")
            self.assertEqual(report["gpuhost_version"], project_version())
            # SM4 needs libgcrypt-20.dll: installed beside gpuhost.exe, it is found there.
            work = os.path.join(self.dir, "sm4")
            os.makedirs(work)
            with open(os.path.join(work, "key.hex"), "w") as f:
                f.write(KEY_HEX + "\n")
            safetensors(os.path.join(work, "step-7.safetensors"))
            push = wine([r"C:\Program Files\gpuhost\gpuhost.exe", "ckpt", "push",
                         windows_path(os.path.join(work, "step-7.safetensors")), "--remote",
                         "file:///" + windows_path(os.path.join(work, "store")), "--job", "msi", "--encrypt", "sm4",
                         "--encryption-key-file", windows_path(os.path.join(work, "key.hex")), "--json"])
            self.assertEqual(push.returncode, 0, push.stdout + push.stderr)
            self.assertEqual(json.loads(push.stdout)["encryption"], "sm4-ctr-hmac-sm3")
            listed = wine(["reg", "query", UNINSTALL_KEY, "/s"]).stdout
            self.assertRegex(listed, r"DisplayName\s+REG_SZ\s+gpuhost")
            self.assertRegex(listed, r"DisplayVersion\s+REG_SZ\s+%s" % re.escape(project_version()))
        finally:
            removed = wine(["msiexec", "/x", windows_path(self.msi), "/qn"])
        self.assertEqual(removed.returncode, 0, removed.stdout + removed.stderr)
        self.assertFalse(os.path.exists(PROGRAM_DIR), os.listdir(PROGRAM_DIR) if os.path.exists(PROGRAM_DIR) else "")
        self.assertNotRegex(wine(["reg", "query", UNINSTALL_KEY, "/s"]).stdout, r"DisplayName\s+REG_SZ\s+gpuhost")

    def test_portable_zip_unpacks_to_one_folder_that_runs(self):
        out = os.path.join(self.dir, "zip")
        proc = subprocess.run(["cpack", "--config", os.path.join(BUILD, "CPackConfig.cmake"), "-G", "ZIP", "-B", out],
                              capture_output=True, text=True, timeout=600)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        archive = os.path.join(out, "gpuhost-%s-windows-x64.zip" % project_version())
        with zipfile.ZipFile(archive) as z:
            names = set(z.namelist())
            top = "gpuhost-%s-windows-x64/" % project_version()
            for want in PACKAGED:
                self.assertIn(top + want, names)
            self.assertFalse([n for n in names if not n.startswith(top)], names)
            z.extractall(os.path.join(out, "unpacked"))
        exe = os.path.join(out, "unpacked", top, "gpuhost.exe")
        self.assertTrue(is_stripped(exe))
        version = wine([exe, "--version"])
        self.assertEqual(version.returncode, 0, version.stderr)
        self.assertIn(project_version(), version.stdout)
        print("\nzip %d bytes; gpuhost.exe %d bytes stripped, %d in the build tree" % (
            os.path.getsize(archive), os.path.getsize(exe), os.path.getsize(BIN)), file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
