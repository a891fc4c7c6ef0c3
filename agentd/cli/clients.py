"""The clients and helpers: `agentd chat`, `agentd demo`, `agentd doctor`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentd.cli.common import ConfigOption, app, fail, load_settings, run, use_config


@app.command()
def chat(
    url: Annotated[
        str | None,
        typer.Option(help="The server's WebSocket URL. Default: ws://HOST:PORT/acp from the settings."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="The bearer token, when the server wants one (env AGENTD_TOKEN).", envvar="AGENTD_TOKEN"
        ),
    ] = None,
    session: Annotated[
        str | None, typer.Option(help="Go back to this session: it is replayed, then goes on live.")
    ] = None,
    cwd: Annotated[
        Path, typer.Option(help="The folder a new session works in. Default: the current folder.")
    ] = Path("."),
    config: ConfigOption = None,
) -> None:
    """A terminal client: prompts, streamed answers as markdown, tool calls, permission
    questions with their diffs, the prompt queue (/queue, /edit N, /drop N, /now N),
    /interject; it reconnects by itself."""
    import asyncio

    from agentd.chat import run_chat
    from agentd.transport import check_url

    use_config(config)
    if url is None:
        settings = load_settings()
        url = f"ws://{settings.host}:{settings.port}/acp"
    if problem := check_url(url):
        fail(ValueError(problem.replace("--connect", "--url", 1)))
    if not cwd.is_dir():
        fail(ValueError(f"--cwd: {cwd} is not a directory"))
    if session is not None and not session.strip():
        fail(ValueError("--session: give a session id (agentd chat prints it when it starts)"))
    try:
        code = asyncio.run(run_chat(url, token=token, cwd=cwd.resolve(), session_id=session))
    except KeyboardInterrupt:  # Ctrl-C: leave at once (the session stays on the server)
        code = 130
    raise typer.Exit(code)


@app.command()
def demo(
    workspace: Annotated[
        Path | None, typer.Option(help="The folder the demo works in. Default: a new temporary folder.")
    ] = None,
    prompt: Annotated[
        str, typer.Option(help="What to ask the demo agent.")
    ] = "Write me a hello-world script.",
) -> None:
    """Run a scripted session end to end, in-process, over a real WebSocket: no key, no network."""
    import asyncio

    from agentd.demo import run_demo

    raise typer.Exit(asyncio.run(run_demo(workspace, prompt)))


@app.command()
def doctor(config: ConfigOption = None) -> None:
    """List the optional parts this machine has (ripgrep, bubblewrap, git, node, the
    database, Redis, a proxy) and what each one changes."""
    from agentd.doctor import gather, report

    use_config(config)
    settings = load_settings()
    for line in report(run(lambda: gather(settings))):
        typer.echo(line.render())
