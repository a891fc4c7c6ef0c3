"""Docker artefacts a user can trust (issue 10). There is no container engine here, so the
Dockerfile and docker-compose.yml are parsed and checked for what they promise, and the
healthcheck's own command is run against a real server."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from agentd.infra.config import Settings
from tests.support.docker_files import compose, env_of, final_stage, instructions, mount_target
from tests.support.paths import REPO_ROOT
from tests.support.proc import free_port
from tests.support.server import scripted

ROOT = REPO_ROOT


def seconds(duration: str) -> float:
    total = 0.0
    for amount, unit in re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", duration):
        total += float(amount) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    return total


def test_every_copied_path_exists_and_the_build_needs_nothing_else() -> None:
    copied = set()
    for keyword, args in instructions():
        if keyword == "COPY" and not args.startswith("--from"):
            *sources, _dest = args.split()
            copied.update(sources)
    for source in copied:
        assert (ROOT / source).exists(), f"COPY {source}: not in the repository"
    # What `pip wheel .` reads: the package metadata, the setup.py mapping, the code.
    assert {"pyproject.toml", "setup.py", "README.md", "agentd", "migrations"} <= copied


def test_the_image_installs_the_package_not_an_editable_checkout() -> None:
    runs = " ".join(args for keyword, args in instructions() if keyword == "RUN")
    assert "pip install" in runs
    assert not re.search(r"pip install[^&]*\s(-e|--editable)\b", runs)
    final_runs = " ".join(args for keyword, args in final_stage() if keyword == "RUN")
    assert re.search(r"pip install [^&]*\.whl", final_runs), "the final image installs the built wheel"
    assert not any(keyword == "COPY" and " agentd" in args for keyword, args in final_stage())


def test_the_image_installs_the_locked_dependencies_then_the_wheel_alone() -> None:
    # What CI tested (requirements-dev.lock holds the same pins plus the dev tools), not
    # whatever the index has newest on the day of the build.
    final_runs = " && ".join(args for keyword, args in final_stage() if keyword == "RUN")
    steps = [step.strip() for step in final_runs.split("&&")]
    locked = [s for s in steps if re.match(r"pip install .*--require-hashes -r \S*requirements\.lock\b", s)]
    wheel = [s for s in steps if re.match(r"pip install .*\.whl", s)]
    assert locked and wheel and steps.index(locked[0]) < steps.index(wheel[0])
    assert "--no-deps" in wheel[0].split(), "the wheel must not resolve its dependencies again"
    copies = [args.split() for keyword, args in final_stage() if keyword == "COPY"]
    assert any(parts[0] == "requirements.lock" for parts in copies)


def test_the_image_has_git_ripgrep_node_and_an_init() -> None:
    stage = final_stage()
    apt = " ".join(args for keyword, args in stage if keyword == "RUN" and "apt-get install" in args)
    packages = set(apt.split("apt-get install", 1)[1].split("&&", 1)[0].split())
    assert {"git", "ripgrep", "tini"} <= packages
    # node and npx: copied from the official node image's stage (a maintained LTS)
    assert any("--from=node" in args and "bin/node" in args for keyword, args in stage if keyword == "COPY")
    (entrypoint,) = [args for keyword, args in stage if keyword == "ENTRYPOINT"]
    assert entrypoint.startswith('["tini"') or entrypoint.startswith('["/usr/bin/tini"')
    # No USER: the entrypoint drops root itself (tests/e2e/cli/test_docker_as_documented.py).
    assert "docker-entrypoint.sh" in entrypoint


def test_agentd_home_is_a_volume() -> None:
    stage = final_stage()
    home = env_of(stage)["AGENTD_HOME"]
    volumes = [args for keyword, args in stage if keyword == "VOLUME"]
    assert any(home in v for v in volumes), (home, volumes)
    service = compose()["services"]["agentd"]
    compose_home = service["environment"].get("AGENTD_HOME", home)
    assert any(mount_target(v) == compose_home for v in service["volumes"]), service["volumes"]


def test_compose_restarts_and_outlasts_the_drain() -> None:
    service = compose()["services"]["agentd"]
    assert service["restart"] in ("always", "unless-stopped", "on-failure")
    grace = float(service["environment"].get("AGENTD_SHUTDOWN_GRACE_S", Settings().shutdown_grace_s))
    assert seconds(service["stop_grace_period"]) > grace


def test_readme_says_how_to_mount_the_users_code() -> None:
    readme = (ROOT / "README.md").read_text()
    root = env_of(final_stage())["AGENTD_WORKSPACE_ROOT"]
    assert re.search(rf'-v "?\$PWD:{re.escape(root)}/\w+"?', readme), (
        "no bind mount of the code in the README"
    )
    service = compose()["services"]["agentd"]
    assert any(mount_target(v).startswith(f"{root}/") for v in service["volumes"])


def healthcheck_command() -> str:
    (args,) = [args for keyword, args in final_stage() if keyword == "HEALTHCHECK"]
    command = args.split(" CMD ", 1)[1]
    assert not command.startswith("["), "exec form cannot read AGENTD_PORT at run time"
    return command


async def run_healthcheck(port: int) -> int:
    python_dir = Path(__import__("sys").executable).parent
    proc = await asyncio.create_subprocess_exec(
        "/bin/sh", "-c", healthcheck_command(),
        env={"AGENTD_PORT": str(port), "PATH": f"{python_dir}:/usr/bin:/bin"},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    return await asyncio.wait_for(proc.wait(), 30)


@pytest.mark.parametrize("serving", [True, False])
async def test_the_healthcheck_follows_the_configured_port(server_factory, serving: bool) -> None:
    if not serving:
        assert await run_healthcheck(free_port()) != 0  # nothing listens there: unhealthy
        return
    async with server_factory(scripted({"text": "ok"})) as server:
        port = int(server.base_url.rsplit(":", 1)[1])
        assert port != 8765
        assert await run_healthcheck(port) == 0
