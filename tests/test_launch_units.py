"""The launchers' logic that needs no host: ``--hosts`` parsing, the agent's events and checks, the
``ssh`` command line, the private files, SLURM's environment (issue 36)."""
import os
import shlex
import stat

import pytest

from gensim_distw2v.launch import agent, slurm
from gensim_distw2v.launch.cli import write_private
from gensim_distw2v.launch.cluster import RemoteCluster
from gensim_distw2v.launch.events import Event, LaunchError
from gensim_distw2v.launch.hosts import parse_hosts
from gensim_distw2v.launch.ssh import SshRunner
from gensim_distw2v.versions import versions

pytestmark = pytest.mark.unit


def test_hosts_are_read_with_their_threads_users_and_repeats():
    hosts = parse_hosts("node1:16, alice@10.0.0.2,node1,[fe80::1]:4")
    assert [(h.destination, h.address, h.threads, h.label) for h in hosts] == [
        ("node1", "node1", 16, "node1"), ("alice@10.0.0.2", "10.0.0.2", 0, "10.0.0.2"),
        ("node1", "node1", 0, "node1#2"), ("fe80::1", "fe80::1", 4, "fe80::1")]
    for bad in ("", " , ", "node1:0", "node1:99999", "a b", "node1:x", "-oProxyCommand=evil", "-oProxyCommand", "-x@h"):
        with pytest.raises(ValueError, match="--hosts"):
            parse_hosts(bad)


def test_agent_events_are_typed_records_checked_on_arrival():
    event = Event("exited", host="h", role="worker", code=-9, message="x" * 9000)
    back = Event.from_line(event.to_line())
    assert back.kind == "exited" and back.code == -9 and len(back.message) == 8000
    for line in ("not json", '{"kind": "boom", "host": "h"}', '{"kind": "ready"}', '{"kind": "ready", "host": 1}',
                 '{"kind": "ready", "host": "h", "extra": 1}'):
        with pytest.raises(ValueError):
            Event.from_line(line)


def test_the_agent_names_another_version():
    assert agent.version_problem(versions(), "h1") is None
    other = dict(versions(), gensim="0.0")
    assert agent.version_problem(other, "h1").startswith(f"host h1 runs other versions: gensim {versions()['gensim']} "
                                                         f"here, 0.0 on the launcher's machine; install")


def test_the_ssh_command_line_carries_no_secret_and_quotes_the_remote_command():
    runner = SshRunner(port=2222, options=["IdentityFile=/k", "StrictHostKeyChecking=accept-new"],
                       python="/opt/v b/python")
    (host,) = parse_hosts("alice@node1:8")
    argv = runner.argv(host.destination, ["--roles", "shard,worker", "--host", "node1", "--label", "node1; rm -rf /"])
    assert argv[:2] == ["ssh", "-T"] and "BatchMode=yes" in argv and ["-p", "2222"] == argv[argv.index("-p"):][:2]
    assert argv[-2] == "alice@node1" and shlex.split(argv[-1]) == [
        "/opt/v b/python", "-m", "gensim_distw2v.launch.agent", "--roles", "shard,worker", "--host", "node1",
        "--label", "node1; rm -rf /"]


def test_shards_per_host_reach_each_agent_and_are_bounded():
    """``--shards-per-host N``: every host's agent starts N shard processes (more fold threads a node), and the
    launcher waits for N a host; 0 or more than the bound is refused by the command line."""
    hosts = parse_hosts("node1,node2")
    cluster = RemoteCluster(hosts, SshRunner(), shards_per_host=2)
    argv = cluster._agent_args(hosts[1], ["shard", "worker"])
    assert argv[argv.index("--shards") + 1] == "2"
    parsed = agent.build_parser().parse_args(argv)
    assert parsed.shards == 2 and parsed.roles == "shard,worker"
    for bad in ("0", str(agent.MAX_SHARDS_PER_HOST + 1)):
        with pytest.raises(SystemExit):
            agent.build_parser().parse_args(["--roles", "shard", "--host", "h", "--ns-host", "h", "--ns-port", "1",
                                             "--shards", bad])
    default = RemoteCluster(hosts, SshRunner())._agent_args(hosts[0], ["shard", "worker"])
    assert agent.build_parser().parse_args(default).shards == 1
    with pytest.raises(ValueError, match="shards_per_host must be 1 to 16, got 0"):
        RemoteCluster(hosts, SshRunner(), shards_per_host=0)


@pytest.mark.parametrize("option", ["StrictHostKeyChecking=no", "stricthostkeychecking off",
                                    'StrictHostKeyChecking="No"', "StrictHostKeyChecking=false"])
def test_options_that_turn_off_the_host_key_check_are_refused_with_the_fix(option):
    with pytest.raises(LaunchError, match=r"the hosts' keys must be checked; add the hosts to known_hosts .*"
                                          r"StrictHostKeyChecking=accept-new"):
        SshRunner(options=["IdentityFile=/k", option])
    for fine in ("StrictHostKeyChecking=accept-new", "StrictHostKeyChecking yes", "UserKnownHostsFile=/k/known"):
        assert SshRunner(options=[fine]).options == [fine]


def test_accept_new_with_no_known_hosts_kept_is_refused():
    """``accept-new`` with ``UserKnownHostsFile=/dev/null`` remembers no key, so every host's key is new and
    accepted: refused, naming the fix; either alone is fine (a known_hosts of /dev/null alone makes ssh refuse
    every host in BatchMode)."""
    with pytest.raises(LaunchError, match=r"no host key would be remembered, so any key is accepted"):
        SshRunner(options=["StrictHostKeyChecking=accept-new", "UserKnownHostsFile /dev/null"])
    for fine in (["UserKnownHostsFile=/dev/null"], ["StrictHostKeyChecking=accept-new", "UserKnownHostsFile=/k/kh"]):
        assert SshRunner(options=fine).options == fine


def test_private_files_are_0600_and_never_written_through_a_symlink(tmp_path):
    old = os.umask(0o022)
    try:
        path = tmp_path / "ns_conf.json"
        write_private(str(path), "{}")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        os.chmod(path, 0o644)
        write_private(str(path), "{}")  # an existing file is made private again
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        os.symlink(tmp_path / "victim", tmp_path / "link")
        with pytest.raises(OSError):
            write_private(str(tmp_path / "link"), "{}")
        assert not (tmp_path / "victim").exists()
    finally:
        os.umask(old)


def test_slurm_mode_outside_an_allocation_says_how_to_run_it():
    with pytest.raises(LaunchError, match=r"SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_NODELIST, SLURM_JOB_ID, "
                                          r"SLURMD_NODENAME not set: run it as one task per node"):
        slurm.allocation({})


@pytest.mark.parametrize("rank", [0, 1])
def test_every_slurm_rank_removes_the_key_file_on_its_way_out(tmp_path, monkeypatch, rank):
    """Rank 0 killed (-9) before everyone joined cannot remove the key file; the others, ending with the
    cluster, do."""
    alloc = slurm.Allocation(rank=rank, size=2, nodes=("n1", "n2"), node=f"n{rank + 1}", job="9", cpus=2,
                             submit_dir=str(tmp_path))
    monkeypatch.setattr(slurm, "allocation", lambda: alloc)
    node = slurm.SlurmCluster()
    path = tmp_path / ".gensim-distw2v-9.key"
    path.write_text("k")
    os.chmod(path, 0o600)
    node.key_path = str(path)
    node.close()
    assert not path.exists()
    node.close()  # (gone already: nothing to do)


def test_the_slurm_key_file_of_another_user_or_readable_by_others_is_refused(tmp_path):
    alloc = slurm.Allocation(rank=1, size=2, nodes=("n1", "n2"), node="n2", job="7", cpus=2,
                             submit_dir=str(tmp_path))
    path = tmp_path / ".gensim-distw2v-7.key"
    path.write_text("k")
    os.chmod(path, 0o644)
    with pytest.raises(LaunchError, match="is not this user's private file"):
        slurm.shared_key(str(tmp_path), alloc)
    os.chmod(path, 0o600)
    assert slurm.shared_key(str(tmp_path), alloc) == ("k", str(path))
    first = slurm.Allocation(rank=0, size=2, nodes=("n1", "n2"), node="n1", job="8", cpus=2,
                             submit_dir=str(tmp_path))
    key, made = slurm.shared_key(str(tmp_path), first)
    assert len(key) >= 32 and stat.S_IMODE(os.stat(made).st_mode) == 0o600
