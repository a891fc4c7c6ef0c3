"""Docker as the README documents it (issue 31, item 1). There is no container engine here,
so what the container would do is run outside it: the image's settings with token auth and
the documented workspace path for the documented principal, on a real `agentd serve`; the
entrypoint (as root, on real folders) making the mount writable and dropping root; and the
files checked for the sandbox options, Node LTS and the healthcheck."""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import agentd, clean_env
from tests.support.client import RpcFailed, WsClient, allow, text_prompt
from tests.support.docker_files import compose, env_of, final_stage, instructions, mount_target
from tests.support.paths import REPO_ROOT
from tests.support.polling import until
from tests.support.proc import agentd_process, free_port, wait_healthy

README = (REPO_ROOT / "README.md").read_text()
ENTRYPOINT = REPO_ROOT / "deploy" / "docker-entrypoint.sh"
SANDBOX_OPTIONS = ("seccomp=unconfined", "apparmor=unconfined")


def readme_docker_run() -> list[str]:
    block = README.split("## Docker", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    run = next(line for line in block.replace("\\\n", " ").splitlines() if "docker run" in line)
    return shlex.split(run.split("#", 1)[0])


def documented_principal() -> str:
    found = re.search(r"docker exec agentd agentd token create --principal (\w+)", README)
    assert found, "the README does not say which token to create"
    return found.group(1)


def test_the_readme_mounts_the_code_where_its_principal_works() -> None:
    run = readme_docker_run()
    root = env_of(final_stage())["AGENTD_WORKSPACE_ROOT"]
    mounts = [run[i + 1] for i, arg in enumerate(run) if arg == "-v"]
    assert f"$PWD:{root}/{documented_principal()}" in mounts, mounts


def test_the_readme_and_compose_carry_the_sandbox_options() -> None:
    run = readme_docker_run()
    options = [run[i + 1] for i, arg in enumerate(run) if arg == "--security-opt"]
    assert sorted(options) == sorted(SANDBOX_OPTIONS)
    for name in ("agentd", "agentd-2"):
        service = compose()["services"][name]
        assert {o.replace(":", "=") for o in service["security_opt"]} == set(SANDBOX_OPTIONS)


def test_compose_mounts_the_workspace_for_the_documented_principal() -> None:
    root = env_of(final_stage())["AGENTD_WORKSPACE_ROOT"]
    for name in ("agentd", "agentd-2"):
        targets = [re.split(r":(?=/)", v)[1] for v in compose()["services"][name]["volumes"]]
        assert f"{root}/${{AGENTD_PRINCIPAL:-{documented_principal()}}}" in targets, targets
        assert "/var/lib/agentd" in [mount_target(v) for v in compose()["services"][name]["volumes"]]
    assert "docker compose exec agentd agentd token" in README


def test_node_is_a_maintained_lts_from_the_official_image() -> None:
    steps = instructions()
    stages = {
        args.split(" AS ")[1].strip(): args.split()[0] for k, args in steps if k == "FROM" and " AS " in args
    }
    image = stages["node"]
    major = int(re.match(r"node:(\d+)", image).group(1))  # type: ignore[union-attr]
    assert major % 2 == 0 and major >= 22, image  # even majors are the LTS lines; 18 and 20 are past
    copies = [args for k, args in final_stage() if k == "COPY" and "--from=node" in args]
    assert any("/usr/local/bin/node" in c for c in copies)
    apt = " ".join(args for k, args in final_stage() if k == "RUN" and "apt-get install" in args)
    assert "nodejs" not in apt.split()  # Debian's is older


def test_the_image_has_a_healthcheck_on_healthz_and_drops_root() -> None:
    stage = final_stage()
    (check,) = [args for k, args in stage if k == "HEALTHCHECK"]
    assert "/healthz" in check
    (entrypoint,) = [args for k, args in stage if k == "ENTRYPOINT"]
    assert "docker-entrypoint.sh" in entrypoint and entrypoint.startswith('["tini"')
    assert any("deploy/docker-entrypoint.sh" in args for k, args in stage if k == "COPY")
    assert "setpriv --reuid" in ENTRYPOINT.read_text()


async def test_the_documented_workspace_opens_for_the_documented_token(tmp_path: Path) -> None:
    """The image's settings outside Docker: token auth on 0.0.0.0 (sandbox on), the
    workspace root, a token for the README's principal; its session opens in the mounted
    folder, and the path documented before (`/workspaces/project`) is refused."""
    principal = documented_principal()
    image = env_of(final_stage())
    workspaces = tmp_path / "workspaces"
    (workspaces / principal).mkdir(parents=True)  # the bind mount
    (workspaces / "project").mkdir()
    port = free_port()
    env = clean_env(
        tmp_path,
        AGENTD_HOST=image["AGENTD_HOST"],
        AGENTD_AUTH=image["AGENTD_AUTH"],
        AGENTD_PORT=str(port),
        AGENTD_HOME=str(tmp_path / "home"),
        AGENTD_WORKSPACE_ROOT=str(workspaces),
    )
    created = await agentd("token", "create", "--principal", principal, env=env, cwd=tmp_path)
    assert created.code == 0, created.text
    token = created.out.strip()
    log = tmp_path / "serve.log"
    async with agentd_process(["serve"], env=env, log=log) as proc:
        await wait_healthy(f"http://127.0.0.1:{port}", proc, log)
        client = await WsClient.connect(f"http://127.0.0.1:{port}", token=token)
        try:
            session = await client.call("session/new", {"cwd": str(workspaces / principal), "mcpServers": []})
            assert session["sessionId"]
            with pytest.raises(RpcFailed) as denied:
                await client.call("session/new", {"cwd": str(workspaces / "project"), "mcpServers": []})
            assert denied.value.code == -32015
        finally:
            await client.close()


def entrypoint(tmp_path: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "AGENTD_WORKSPACE_ROOT": str(tmp_path / "workspaces"),
        "AGENTD_HOME": str(tmp_path / "home"),
        "AGENTD_USER_HOME": str(tmp_path),
    }
    return subprocess.run(
        ["/bin/sh", str(ENTRYPOINT), *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the entrypoint's chown and setpriv need root")


@pytest.fixture
def open_dir() -> Iterator[Path]:
    """A folder every user can reach (pytest's tmp_path sits under a 0700 root-only one)."""
    path = Path(tempfile.mkdtemp(prefix="agentd-entrypoint-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@needs_root
def test_a_folder_docker_created_for_the_mount_becomes_writable(open_dir: Path) -> None:
    """compose's ./workspace on a first `up`: Docker makes it, root-owned and empty."""
    tmp_path = open_dir
    mount = tmp_path / "workspaces" / "you"
    mount.mkdir(parents=True)  # root-owned, empty
    ran = entrypoint(tmp_path, ["sh", "-c", f"id -u && touch {mount}/written && touch {tmp_path}/home/db"])
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["1000"]  # not root
    assert (mount / "written").stat().st_uid == 1000
    assert (tmp_path / "home").stat().st_uid == 1000


@needs_root
def test_the_users_code_is_written_as_its_owner_and_never_chowned(open_dir: Path) -> None:
    tmp_path = open_dir
    mount = tmp_path / "workspaces" / "you"
    mount.mkdir(parents=True)
    (mount / "main.py").write_text("print('hi')\n")
    os.chown(mount, 1234, 1234)
    os.chown(mount / "main.py", 1234, 1234)
    ran = entrypoint(tmp_path, ["sh", "-c", f"id -u && echo more >> {mount}/main.py"])
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["1234"]
    assert (mount / "main.py").read_text() == "print('hi')\nmore\n"
    assert (mount / "main.py").stat().st_uid == 1234


def docker_engine() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "info"], capture_output=True, timeout=30, check=False)
    return probe.returncode == 0


def docker(*args: str, timeout: float = 120) -> str:
    done = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"docker {' '.join(args[:3])}: {done.stderr[-2000:]}"
    return done.stdout


@pytest.mark.timeout(1200)  # builds the image
@pytest.mark.skipif(not docker_engine(), reason="no Docker engine here (the settings are tested above)")
async def test_the_readme_docker_run_works_unchanged(open_dir: Path) -> None:
    """The README's commands, with only the names made unique and the port a free one:
    healthy, the token for the documented principal opens the mounted folder, and the demo
    agent writes its file into it and runs it (sandboxed)."""
    tag = f"agentd-e2e-{os.getpid()}"
    port = free_port()
    principal = documented_principal()
    await asyncio.to_thread(docker, "build", "-t", tag, str(REPO_ROOT), timeout=1100)
    run = readme_docker_run()
    args = []
    for arg in run[2:]:
        arg = arg.replace("$PWD", str(open_dir)).replace("agentd-home:", f"{tag}-home:")
        args.append({"agentd": tag, "8765:8765": f"127.0.0.1:{port}:8765"}.get(arg, arg))
    args[args.index("--name") + 1] = tag
    try:
        await asyncio.to_thread(docker, "run", *args)

        async def healthy() -> bool:
            status = await asyncio.to_thread(docker, "inspect", "-f", "{{.State.Health.Status}}", tag)
            return status.strip() == "healthy"

        await until(healthy, within=120, what="the container's HEALTHCHECK")
        token = await asyncio.to_thread(
            docker, "exec", tag, "agentd", "token", "create", "--principal", principal
        )
        client = await WsClient.connect(f"http://127.0.0.1:{port}", token=token.strip())
        client.on_request = allow()
        try:
            cwd = f"/workspaces/{principal}"
            sid = (await client.call("session/new", {"cwd": cwd, "mcpServers": []}))["sessionId"]
            done = await client.call("session/prompt", text_prompt(sid, "Write me a hello-world script."))
            assert done["stopReason"] == "end_turn"
        finally:
            await client.close()
        written = await asyncio.to_thread(lambda: list(open_dir.glob("*.py")))
        assert written, "the agent wrote nothing into the mounted folder"
    finally:
        await asyncio.to_thread(subprocess.run, ["docker", "rm", "-f", tag], capture_output=True, check=False)
        await asyncio.to_thread(
            subprocess.run, ["docker", "volume", "rm", f"{tag}-home"], capture_output=True, check=False
        )
        await asyncio.to_thread(subprocess.run, ["docker", "rmi", tag], capture_output=True, check=False)
