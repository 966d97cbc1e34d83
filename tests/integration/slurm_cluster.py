"""A real Slurm cluster of two nodes on 127.0.0.1 for the tests, from Debian's packages (slurmctld,
slurmd, slurm-client, munge; scripts/install-deps.sh installs them): munged with a key of its
own, slurmctld and two `slurmd -N n1` / `slurmd -N n2`, all in the foreground as children of
the test, with every file (config, state, spool, logs, munge socket) in one folder. No systemd,
nothing outside that folder, stopped by PID (research/06 §4.4, §9.14).

Partitions: `low` (PriorityTier 1, PreemptMode REQUEUE, GraceTime 60) and `high` (PriorityTier
10): a job on `high` preempts one on `low`. `SlurmctldParameters=preempt_send_user_signal` sends
the job's --signal at preemption. One CPU per node, so two 2-node jobs cannot run at once."""
import os
import shutil
import signal
import socket
import subprocess
import time

from gpuhost_test import free_port_pair

DAEMONS = ("munged", "slurmctld", "slurmd", "scontrol", "sbatch")


def available():
    if os.geteuid() != 0 or not all(shutil.which(d) or os.path.exists("/usr/sbin/" + d) for d in DAEMONS):
        return False
    import pwd

    try:
        pwd.getpwnam("munge")
    except KeyError:
        return False
    return True


def _free_ports(count):
    sockets = []
    for _ in range(count):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        sockets.append(s)
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


class SlurmCluster:
    def __init__(self, folder, grace_time=60):
        self.folder = folder
        shutil.rmtree(folder, ignore_errors=True)
        os.makedirs(folder)
        os.chmod(folder, 0o755)
        self.conf = os.path.join(folder, "slurm.conf")
        # munged runs as Debian's munge user (as its service does): as root it refuses
        # credentials to root clients ("Unauthorized credential").
        self.munge_dir = os.path.join(folder, "munge")
        self.socket = os.path.join(self.munge_dir, "munge.socket")
        self.procs = []
        (self.ctld_port,) = _free_ports(1)
        self.node_port = free_port_pair()
        host = socket.gethostname()
        f = folder
        config = """ClusterName=gpuhosttest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={f}/state
SlurmdSpoolDir={f}/spool-%n
SlurmctldPidFile={f}/slurmctld.pid
SlurmdPidFile={f}/slurmd-%n.pid
SlurmctldLogFile={f}/slurmctld.log
SlurmdLogFile={f}/slurmd-%n.log
ProctrackType=proctrack/pgid
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
SlurmctldParameters=preempt_send_user_signal
JobRequeue=1
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
KillWait=10
MinJobAge=600
SlurmdTimeout=60
InactiveLimit=0
SlurmdParameters=config_overrides
NodeName=n[1-2] NodeHostname={host} NodeAddr=127.0.0.1 Port={p1}-{p2} CPUs=1 State=UNKNOWN
PartitionName=low Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP PriorityTier=1 PreemptMode=REQUEUE GraceTime={grace}
PartitionName=high Nodes=n[1-2] MaxTime=INFINITE State=UP PriorityTier=10 PreemptMode=OFF
""".format(host=host, ctld=self.ctld_port, sock=self.socket, f=f, p1=self.node_port, p2=self.node_port + 1,
           grace=grace_time)
        with open(self.conf, "w") as out:
            out.write(config)
        for sub in ("state", "spool-n1", "spool-n2"):
            os.makedirs(os.path.join(folder, sub))
        self.env = dict(os.environ, SLURM_CONF=self.conf)

    def _start(self, argv, name):
        log = open(os.path.join(self.folder, name + ".out"), "w")
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        log.close()
        self.procs.append(proc)
        return proc

    def start(self, timeout=60):
        import pwd

        munge = pwd.getpwnam("munge")
        os.makedirs(self.munge_dir)
        os.chmod(self.munge_dir, 0o755)
        os.chown(self.munge_dir, munge.pw_uid, munge.pw_gid)
        key = os.path.join(self.munge_dir, "munge.key")
        with open(key, "wb") as out:
            out.write(os.urandom(1024))
        os.chmod(key, 0o400)
        os.chown(key, munge.pw_uid, munge.pw_gid)
        m = self.munge_dir
        self._start(["runuser", "-u", "munge", "--", "munged", "-F", "--key-file", key, "--socket", self.socket,
                     "--pid-file", m + "/munged.pid", "--log-file", m + "/munged.log", "--seed-file",
                     m + "/munged.seed"], "munged")
        self._wait(lambda: os.path.exists(self.socket), "munged's socket", timeout)
        self._start(["slurmctld", "-D", "-i", "-f", self.conf], "slurmctld")
        self._wait(lambda: self.run("scontrol", "ping").returncode == 0, "slurmctld", timeout)
        for node in ("n1", "n2"):
            self._start(["slurmd", "-D", "-N", node, "-f", self.conf], "slurmd-" + node)
        self._wait(lambda: self.node_states() == ["idle", "idle"], "both nodes idle", timeout)
        return self

    def _wait(self, predicate, what, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError("a Slurm daemon exited (%s) waiting for %s:\n%s" % (proc.args[0], what,
                                                                                          self.logs()))
            time.sleep(0.2)
        raise RuntimeError("timed out waiting for %s:\n%s" % (what, self.logs()))

    def run(self, *argv, timeout=30):
        return subprocess.run(list(argv), env=self.env, capture_output=True, text=True, timeout=timeout)

    def node_states(self):
        out = self.run("sinfo", "-h", "-N", "-p", "low", "-o", "%N %T").stdout.split()
        return [state.rstrip("*") for state in out[1::2]]

    def sbatch(self, *args):
        proc = self.run("sbatch", "--parsable", *args)
        if proc.returncode != 0:
            raise RuntimeError("sbatch failed: %s" % proc.stderr)
        return proc.stdout.strip().split(";")[0]

    def job(self, job_id):
        """`scontrol show job` as a dict (JobState, Restarts, Reason...)."""
        proc = self.run("scontrol", "-o", "show", "job", job_id)
        fields = {}
        for item in proc.stdout.split():
            if "=" in item:
                key, value = item.split("=", 1)
                fields.setdefault(key, value)
        return fields

    def wait_job(self, job_id, predicate, what, timeout=240):
        deadline = time.monotonic() + timeout
        job = {}
        while time.monotonic() < deadline:
            job = self.job(job_id)
            if predicate(job):
                return job
            time.sleep(0.3)
        raise RuntimeError("timed out waiting for job %s to be %s (last: %s)\n%s" % (job_id, what, job, self.logs()))

    def logs(self):
        text = []
        for name in sorted(os.listdir(self.folder)):
            if name.endswith((".log", ".out")):
                with open(os.path.join(self.folder, name), errors="replace") as f:
                    text.append("--- %s\n%s" % (name, f.read()[-3000:]))
        return "\n".join(text)

    def stop(self):
        # Jobs first (their slurmstepd and tasks live in sessions of their own), then the daemons.
        if self.procs and self.procs[0].poll() is None:
            self.run("scancel", "--full", "--signal=KILL", "-u", "root")
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and self.run("squeue", "-h").stdout.strip():
                time.sleep(0.3)
        for proc in reversed(self.procs):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
