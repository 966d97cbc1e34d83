"""The Windows build under Wine: registry values set with `wine reg add` steer doctor's Windows
OS-settings and firewall findings. Uses a Wine prefix of its own so other tests are not affected."""
import os
import subprocess
import unittest

from gpuhost_test import WINE, GpuhostTestCase, findings, scenario_env, tmp_dir

PREFIX = tmp_dir("wine-registry-prefix")
GRAPHICS = r"HKLM\SYSTEM\CurrentControlSet\Control\GraphicsDrivers"
POWER = r"HKLM\SYSTEM\CurrentControlSet\Control\Session Manager\Power"
FILESYSTEM = r"HKLM\SYSTEM\CurrentControlSet\Control\FileSystem"
TERMINAL = r"HKLM\SOFTWARE\Policies\Microsoft\Windows NT\Terminal Services"
FIREWALL = r"HKLM\SYSTEM\CurrentControlSet\Services\SharedAccess\Parameters\FirewallPolicy"


def wine_env():
    env = dict(os.environ)
    env["GPUHOST_WINEPREFIX"] = PREFIX
    return env


def reg(*args):
    proc = subprocess.run([WINE, "reg"] + list(args), env=wine_env(), capture_output=True, text=True, timeout=120)
    return proc


def set_dword(key, name, value):
    proc = reg("add", key, "/v", name, "/t", "REG_DWORD", "/d", str(value), "/f")
    assert proc.returncode == 0, proc.stderr


def delete_value(key, name):
    reg("delete", key, "/v", name, "/f")  # absent already is fine


@unittest.skipUnless(WINE, "Windows build only")
class WindowsRegistry(GpuhostTestCase):
    def doctor(self):
        env = scenario_env("t4_windows_wddm")
        env["GPUHOST_WINEPREFIX"] = PREFIX
        proc, report = self.doctor_json(["--no-python", "--only", "os,security"], env=env)
        return findings(report)

    def test_tdr_values_follow_the_registry(self):
        delete_value(GRAPHICS, "TdrDelay")
        delete_value(GRAPHICS, "TdrLevel")
        f = self.doctor()
        self.assertEqual(f["os.windows.tdr.short"]["severity"], "warn")
        self.assertIn("TdrDelay absent (default 2 s)", f["os.windows.tdr.short"]["evidence"])
        set_dword(GRAPHICS, "TdrDelay", 60)
        f = self.doctor()
        self.assertNotIn("os.windows.tdr.short", f)
        self.assertIn("TdrDelay 60", f["os.windows.tdr"]["evidence"])
        set_dword(GRAPHICS, "TdrLevel", 0)
        f = self.doctor()
        self.assertEqual(f["os.windows.tdr.disabled"]["severity"], "warn")
        delete_value(GRAPHICS, "TdrLevel")

    def test_fast_startup_long_paths_and_rdp_policy_follow_the_registry(self):
        set_dword(POWER, "HiberbootEnabled", 1)
        delete_value(FILESYSTEM, "LongPathsEnabled")
        delete_value(TERMINAL, "bEnumerateHWBeforeSW")
        f = self.doctor()
        self.assertIn("os.windows.fast_startup.on", f)
        self.assertIn("HiberbootEnabled 1", f["os.windows.fast_startup.on"]["evidence"])
        self.assertIn("os.windows.long_paths.off", f)
        self.assertIn("os.windows.rdp_gpu.off", f)
        set_dword(POWER, "HiberbootEnabled", 0)
        set_dword(FILESYSTEM, "LongPathsEnabled", 1)
        set_dword(TERMINAL, "bEnumerateHWBeforeSW", 1)
        f = self.doctor()
        self.assertEqual(f["os.windows.fast_startup"]["severity"], "ok")
        self.assertEqual(f["os.windows.long_paths"]["severity"], "ok")
        self.assertEqual(f["os.windows.rdp_gpu"]["severity"], "ok")

    def test_firewall_state_follows_the_registry(self):
        for profile in ("DomainProfile", "StandardProfile", "PublicProfile"):
            set_dword(FIREWALL + "\\" + profile, "EnableFirewall", 1)
        f = self.doctor()
        self.assertEqual(f["security.firewall"]["severity"], "ok")
        set_dword(FIREWALL + "\\PublicProfile", "EnableFirewall", 0)
        f = self.doctor()
        off = f["security.firewall.off"]
        self.assertEqual(off["severity"], "warn")
        self.assertIn("PublicProfile: EnableFirewall=0 (local)", off["evidence"])
        self.assertIn("netsh advfirewall set allprofiles state on", off["fix"])


if __name__ == "__main__":
    unittest.main()
