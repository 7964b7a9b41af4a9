"""A real SLURM cluster on this machine for the launcher's tests: ``munged``, ``slurmctld`` and one
``slurmd -N nodeK`` per node (Debian's slurmd runs several under names of their own, each on a
port of its own, all at 127.0.0.1), everything (config, key, state, logs) in one folder, the
daemons children of the test; nothing under /etc is touched."""
import os
import shutil
import signal
import socket
import subprocess
import time

DAEMONS = ("munged", "slurmctld", "slurmd", "srun", "sinfo", "scontrol", "scancel")


def missing():
    """The SLURM and munge programs this machine lacks."""
    path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
    return [name for name in DAEMONS if shutil.which(name, path=path) is None]


def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Slurm:
    """``nodes`` nodes of ``cpus`` CPUs in ``folder`` (keep its path short: unix sockets live there)."""

    def __init__(self, folder, nodes=2, cpus=2):
        self.folder, self.procs = folder, []
        self.names = [f"node{i + 1}" for i in range(nodes)]
        paths = {name: os.path.join(folder, name) for name in ("state", "spool", "log", "munge", "etc")}
        for path in paths.values():
            os.makedirs(path, mode=0o755, exist_ok=True)
        os.chmod(folder, 0o755)
        self.conf = os.path.join(paths["etc"], "slurm.conf")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SLURMD_", "SBATCH_", "SRUN_"))}
        self.env.update(SLURM_CONF=self.conf, PATH=self.env.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin")
        sock = os.path.join(paths["munge"], "munge.socket")
        nodes_conf = "".join(f"NodeName={name} NodeHostname={socket.gethostname()} NodeAddr=127.0.0.1 "
                             f"Port={_free_port()} CPUs={cpus} RealMemory=1000 State=UNKNOWN\n" for name in self.names)
        with open(self.conf, "w") as fout:
            fout.write(f"""ClusterName=gdw{os.getpid() % 100000}
SlurmctldHost={socket.gethostname()}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock}
StateSaveLocation={paths['state']}
SlurmdSpoolDir={paths['spool']}/%n
SlurmctldPidFile={paths['log']}/slurmctld.pid
SlurmdPidFile={paths['log']}/slurmd-%n.pid
SlurmctldLogFile={paths['log']}/slurmctld.log
SlurmdLogFile={paths['log']}/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
ReturnToService=2
KillWait=5
MinJobAge=4
InactiveLimit=0
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
{nodes_conf}PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        key = os.path.join(paths["munge"], "munge.key")
        with open(os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as fout:
            fout.write(os.urandom(128))
        self.logs = paths["log"]
        try:
            self._start("munged", ["munged", "-F", "--force", f"--key-file={key}", f"--socket={sock}",
                                   f"--pid-file={paths['munge']}/munged.pid", f"--seed-file={paths['munge']}/seed"])
            self._until(lambda: os.path.exists(sock), "munged's socket")
            self._start("slurmctld", ["slurmctld", "-D", "-i"])
            for name in self.names:
                self._start(f"slurmd-{name}", ["slurmd", "-D", "-N", name])
            self._until(self._idle, "every node idle")
        except BaseException:
            self.stop()
            raise

    def _start(self, name, argv):
        with open(os.path.join(self.logs, name + ".out"), "ab") as out:
            self.procs.append(subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                               env=self.env, cwd=self.folder, start_new_session=True))

    def _until(self, ready, what, timeout=30):
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [p.args[0] for p in self.procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(f"SLURM: no {what} ({'exited: ' + ', '.join(dead) if dead else 'timed out'}); "
                                   f"logs in {self.logs}")
            time.sleep(0.1)

    def _idle(self):
        out = self.run(["sinfo", "-h", "-N", "-o", "%N %T"]).stdout.split()
        return len(out) == 2 * len(self.names) and all(state == "idle" for state in out[1::2])

    def run(self, argv, **kwargs):
        kwargs.setdefault("env", self.env)
        return subprocess.run(argv, capture_output=True, text=True, timeout=kwargs.pop("timeout", 60), **kwargs)

    def popen(self, argv, **kwargs):
        return subprocess.Popen(argv, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                **kwargs)

    def stop(self):
        """Cancel every job, stop the daemons (slurmd, slurmctld, munged), kill what is left of them."""
        if any(p.poll() is None for p in self.procs):
            self.run(["scancel", "--user", "root"], timeout=20)
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
