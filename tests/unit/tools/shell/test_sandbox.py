"""The sandbox's pure parts: the start-up decision and the bwrap argv (issue 13, item 2).
What the argv really does is tried against bubblewrap in tests/e2e/tools/test_sandbox_escapes.py."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentd.infra.config import AuthMode, SandboxSetting, Settings
from agentd.preflight import StartupError, check_sandbox
from agentd.tools.shell import paths_under_tmp
from agentd.tools.shell.pidlimit import _own_paths
from agentd.tools.shell.sandbox import (
    BRIDGE_PORT,
    EGRESS_SOCKET,
    BwrapProbe,
    SandboxError,
    SandboxLimits,
    SandboxMode,
    SandboxPolicy,
    bwrap_argv,
    in_cgroup,
    is_loopback,
    limits_prologue,
    resolve_sandbox,
)

FOUND = BwrapProbe("/usr/bin/bwrap")
MISSING = BwrapProbe(None)
BROKEN = BwrapProbe("/usr/bin/bwrap", "setting up uid map: Permission denied")


@pytest.mark.parametrize("probe", [FOUND, MISSING, BROKEN])
def test_an_explicit_none_is_accepted_everywhere(probe: BwrapProbe) -> None:
    d = resolve_sandbox(SandboxSetting.NONE, probe, "0.0.0.0", AuthMode.TOKEN)
    assert d.mode is SandboxMode.NONE and not d.warn
    assert "AGENTD_SANDBOX=none" in d.message


@pytest.mark.parametrize("setting", [SandboxSetting.AUTO, SandboxSetting.BWRAP])
def test_bwrap_is_used_when_it_works(setting: SandboxSetting) -> None:
    d = resolve_sandbox(setting, FOUND, "0.0.0.0", AuthMode.TOKEN)
    assert d.mode is SandboxMode.BWRAP
    assert "/usr/bin/bwrap" in d.message


@pytest.mark.parametrize("probe", [MISSING, BROKEN])
def test_auto_without_bwrap_on_loopback_runs_unconfined_with_a_warning(probe: BwrapProbe) -> None:
    for host, auth in [("127.0.0.1", AuthMode.NONE), ("::1", AuthMode.TOKEN), ("localhost", AuthMode.TOKEN)]:
        d = resolve_sandbox(SandboxSetting.AUTO, probe, host, auth)
        assert d.mode is SandboxMode.NONE and d.warn
        assert "unconfined" in d.message and "bubblewrap" in d.message


@pytest.mark.parametrize("probe", [MISSING, BROKEN])
def test_auto_without_bwrap_off_loopback_with_tokens_refuses(probe: BwrapProbe) -> None:
    with pytest.raises(SandboxError) as err:
        resolve_sandbox(SandboxSetting.AUTO, probe, "0.0.0.0", AuthMode.TOKEN)
    text = str(err.value)
    assert "refusing to serve on 0.0.0.0" in text
    assert "AGENTD_SANDBOX=none" in text and "apt-get install bubblewrap" in text
    assert probe.describe() in text  # says what was wrong with bwrap


@pytest.mark.parametrize("probe", [MISSING, BROKEN])
def test_bwrap_required_but_unusable_refuses(probe: BwrapProbe) -> None:
    with pytest.raises(SandboxError, match="AGENTD_SANDBOX=bwrap"):
        resolve_sandbox(SandboxSetting.BWRAP, probe, "127.0.0.1", AuthMode.NONE)


def test_an_installed_bwrap_that_cannot_run_names_the_docker_flags_in_one_line() -> None:
    """Docker's default profiles forbid bwrap's user namespaces: the refusal says exactly
    what to add to `docker run` (issue 31, item 1)."""
    with pytest.raises(SandboxError) as err:
        resolve_sandbox(SandboxSetting.AUTO, BROKEN, "0.0.0.0", AuthMode.TOKEN)
    text = str(err.value)
    assert "--security-opt seccomp=unconfined --security-opt apparmor=unconfined" in text
    assert "\n" not in text
    assert "security-opt" not in MISSING.describe()  # not installed: installing is the fix


def test_loopback_hosts() -> None:
    assert is_loopback("127.0.0.1") and is_loopback("127.8.0.1") and is_loopback("::1")
    assert is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("10.0.0.1") and not is_loopback("example.com")


def test_preflight_refuses_auto_off_loopback_when_bwrap_is_not_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # a real lookup that finds no bwrap
    token_public = {"host": "0.0.0.0", "auth": AuthMode.TOKEN, "home": tmp_path}
    with pytest.raises(StartupError, match=r"AGENTD_SANDBOX: refusing to serve on 0\.0\.0\.0"):
        check_sandbox(Settings(**token_public))
    check_sandbox(Settings(**token_public, sandbox=SandboxSetting.NONE))  # explicit: accepted
    check_sandbox(Settings(home=tmp_path))  # loopback: auto falls back with a warning


# ---------------------------------------------------------------------------- the argv


def mounts(argv: list[str]) -> list[tuple[str, str]]:
    """(option, destination) of every mount, in order."""
    out = []
    i = 1
    while i < len(argv) and argv[i] != "--":
        opt = argv[i]
        if opt in ("--ro-bind", "--bind"):
            out.append((opt, argv[i + 2]))
            i += 3
        elif opt in ("--tmpfs", "--dev", "--proc"):
            out.append((opt, argv[i + 1]))
            i += 2
        elif opt in ("--chdir", "--cap-drop"):
            i += 2
        else:
            i += 1
    return out


def test_argv_read_only_root_hidden_home_and_workspaces_and_the_workspace_bound_back() -> None:
    policy = SandboxPolicy(
        bwrap="/usr/bin/bwrap",
        hidden_dirs=(Path("/srv/home"), Path("/srv/home/workspaces")),
        hidden_files=(Path("/srv/home/agentd.db"), Path("/data/agentd.db")),
    )
    ws = Path("/srv/home/workspaces/alice")
    argv = bwrap_argv(policy, ws, "make test")
    assert argv[0] == "/usr/bin/bwrap"
    m = mounts(argv)
    assert m[0] == ("--ro-bind", "/")  # everything read-only first
    assert ("--tmpfs", "/tmp") in m and ("--dev", "/dev") in m and ("--proc", "/proc") in m
    # The home is hidden, the workspace bound back on top (later); the workspaces root is
    # under the home, so already hidden; so is the database in it.
    assert m.index(("--tmpfs", "/srv/home")) < m.index(("--bind", str(ws)))
    assert ("--tmpfs", "/srv/home/workspaces") not in m
    assert ("--ro-bind", "/srv/home/agentd.db") not in m
    # A database file elsewhere is replaced by /dev/null.
    i = argv.index("/data/agentd.db")
    assert argv[i - 2 : i] == ["--ro-bind", "/dev/null"]
    assert argv[argv.index("--chdir") + 1] == str(ws)
    for flag in ("--unshare-pid", "--die-with-parent", "--new-session"):
        assert flag in argv
    assert argv[argv.index("--cap-drop") + 1] == "ALL"
    assert "--unshare-net" in argv  # always: the host's loopback (agentd's API) is out of reach
    # The command is the last argument, passed as data, never spliced into a script.
    assert argv[-1] == "make test"
    assert argv[argv.index("--") + 1 : argv.index("--") + 3] == ["/bin/bash", "-c"]


def test_argv_hides_what_lies_inside_the_workspace_after_binding_it() -> None:
    ws = Path("/home/u/project")
    policy = SandboxPolicy(hidden_dirs=(Path("/home/u/project/.agentd-home"),), hidden_files=(ws / "app.db",))
    m = mounts(bwrap_argv(policy, ws, "ls"))
    assert m.index(("--bind", str(ws))) < m.index(("--tmpfs", f"{ws}/.agentd-home"))
    assert m.index(("--bind", str(ws))) < m.index(("--ro-bind", f"{ws}/app.db"))


def test_argv_workspace_that_is_the_hidden_root_itself_stays_visible() -> None:
    ws = Path("/srv/workspaces")
    m = mounts(bwrap_argv(SandboxPolicy(hidden_dirs=(ws,)), ws, "ls"))
    assert m.index(("--tmpfs", str(ws))) < m.index(("--bind", str(ws)))


def test_argv_files_under_tmp_are_already_gone_unless_in_the_workspace() -> None:
    ws = Path("/tmp/t/ws")
    policy = SandboxPolicy(hidden_dirs=(Path("/tmp/t/home"),), hidden_files=(Path("/tmp/t/db.sqlite"),))
    m = mounts(bwrap_argv(policy, ws, "ls"))
    assert ("--tmpfs", "/tmp/t/home") not in m and ("--ro-bind", "/tmp/t/db.sqlite") not in m
    assert m.index(("--tmpfs", "/tmp")) < m.index(("--bind", str(ws)))


def test_argv_binds_back_readable_paths_under_tmp_but_never_a_hidden_one() -> None:
    ws = Path("/srv/ws")
    venv, home = Path("/tmp/t/venv"), Path("/tmp/t/venv/home")
    policy = SandboxPolicy(hidden_dirs=(home, Path("/tmp/h")), hidden_files=(Path("/tmp/t/db.sqlite"),))
    readable = [venv, Path("/tmp/h/server.py"), Path("/tmp/t/db.sqlite"), Path("/opt/x"), Path("/tmp")]
    m = mounts(bwrap_argv(policy, ws, "ls", readable=readable))
    assert m.index(("--tmpfs", "/tmp")) < m.index(("--ro-bind", str(venv)))
    # A hidden directory inside a path bound back is hidden again, on top of it.
    assert m.index(("--ro-bind", str(venv))) < m.index(("--tmpfs", str(home)))
    # Nothing hidden, nothing outside /tmp and not /tmp itself is bound back.
    assert [d for o, d in m if o == "--ro-bind" and d != "/"] == [str(venv)]


def test_paths_under_tmp_finds_the_command_its_interpreter_scripts_and_virtualenvs(tmp_path: Path) -> None:
    assert tmp_path.is_relative_to("/tmp")  # pytest's base temp (the sandbox's case)
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    python = venv / "bin" / "python"
    python.symlink_to(sys.executable)
    script = tmp_path / "server.py"
    script.write_text(f"#!{python}\nprint('hi')\n")
    data = tmp_path / "data"
    data.mkdir()
    assert paths_under_tmp([str(python), str(script), "--port", "1"]) == [venv, script]
    # A script's `#!` interpreter comes with it; a directory argument never does.
    assert paths_under_tmp([str(script), str(data), "/tmp/missing.py"]) == [script, venv]
    assert paths_under_tmp(["sh", "-c", "exit 0"]) == []


def test_argv_always_unshares_the_network_and_hides_daemon_sockets() -> None:
    # Issue 28: network on or off, the sandbox has its own network namespace (only its own
    # loopback) and no /run (daemons' Unix sockets): agentd's API cannot be reached from it.
    for policy in (SandboxPolicy(network=False), SandboxPolicy(), SandboxPolicy(python="/usr/bin/python3")):
        argv = bwrap_argv(policy, Path("/w"), "curl x")
        assert "--unshare-net" in argv[: argv.index("--")]
        assert ("--tmpfs", "/run") in mounts(argv)
        assert str(EGRESS_SOCKET) not in argv  # no egress socket given: no way out


def test_argv_network_on_binds_the_egress_socket_and_starts_the_bridge_first() -> None:
    policy = SandboxPolicy(python="/usr/bin/python3", limits=SandboxLimits(cpu_s=5))
    argv = bwrap_argv(policy, Path("/w"), "curl x", Path("/tmp/e/egress.sock"), "BRIDGE")
    m = mounts(argv)
    # Read-only, on top of the empty /run.
    assert m.index(("--tmpfs", "/run")) < m.index(("--ro-bind", str(EGRESS_SOCKET)))
    assert argv[argv.index("/tmp/e/egress.sock") + 1] == str(EGRESS_SOCKET)
    prologue = argv[argv.index("--") + 3]
    # The bridge runs, says ready, then limits and the command; its code and interpreter
    # are arguments (data), the command stays $1.
    bridge, limits = prologue.index(str(BRIDGE_PORT)), prologue.index("ulimit")
    assert bridge < limits < prologue.index('exec /bin/bash -c "$1"')
    assert argv[-3:] == ["curl x", "/usr/bin/python3", "BRIDGE"]


def test_limits_prologue_sets_each_limit_and_skips_zero() -> None:
    text = limits_prologue(SandboxLimits(cpu_s=60, memory_mb=512, file_mb=10, procs=100))
    assert text.startswith("ulimit -t 60 -d 524288 -f 10240 -u 100 || exit 126; ")
    assert text.endswith('exec /bin/bash -c "$1"')
    assert limits_prologue(SandboxLimits()) == 'exec /bin/bash -c "$1"'
    assert "-u" not in limits_prologue(SandboxLimits(cpu_s=5))


def test_in_cgroup_quotes_the_path_and_keeps_the_argv() -> None:
    argv = in_cgroup(Path("/sys/fs/cgroup/pids/a b/cgroup.procs"), ["bwrap", "--", "x y"])
    assert argv[:2] == ["/bin/sh", "-c"]
    assert "'/sys/fs/cgroup/pids/a b/cgroup.procs'" in argv[2]
    assert argv[-3:] == ["bwrap", "--", "x y"]


def test_own_cgroup_paths_from_proc_self_cgroup() -> None:
    v1 = "9:name=systemd:/\n8:pids:/user.slice\n4:memory:/x\n0::/\n"
    assert _own_paths(v1) == ("/user.slice", "/")
    assert _own_paths("0::/system.slice/agentd.service\n") == (None, "/system.slice/agentd.service")


def test_the_cgroup_sweep_spares_the_groups_of_live_servers(tmp_path: Path) -> None:
    """Servers sharing a cgroup parent (replicas, test workers) must not remove each other's
    freshly made, still empty cgroup; leftovers of dead servers and unowned names go."""
    import os
    import subprocess

    from agentd.tools.shell.pidlimit import sweep

    dead = subprocess.Popen(["true"])
    dead.wait()
    mine = tmp_path / f"agentd-{os.getpid()}-abc"
    probe = tmp_path / f"agentd-{os.getpid()}-probe"
    leftover = tmp_path / f"agentd-{dead.pid}-def"
    unowned = tmp_path / "agentd-b79e0570f6f554fca06fc10c"
    huge = tmp_path / "agentd-123456789012345678901234"
    other = tmp_path / "not-ours"
    for d in (mine, probe, leftover, unowned, huge, other):
        d.mkdir()
    sweep(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in (mine, probe, other))
