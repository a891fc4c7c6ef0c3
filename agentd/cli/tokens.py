"""`agentd token create|list|revoke`: bearer tokens for AGENTD_AUTH=token."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import typer

from agentd.cli.common import ConfigOption, DbOption, app, load_settings, run, use_config

token_app = typer.Typer(help="Bearer tokens for AGENTD_AUTH=token (stored hashed).", no_args_is_help=True)
app.add_typer(token_app, name="token")


def _with_store(database_url: str | None, job: Any) -> Any:
    from agentd.preflight import open_store

    settings = load_settings(database_url=database_url)

    async def with_store() -> Any:
        async with open_store(settings.resolved_database_url()) as store:
            return await job(store)

    return run(with_store)


@token_app.command("create")
def token_create(
    principal: Annotated[str, typer.Option(help="Who the token acts as; that principal owns its sessions.")],
    name: Annotated[
        str | None, typer.Option(help="A label for the token, e.g. the device it is for.")
    ] = None,
    team: Annotated[
        list[str] | None,
        typer.Option(
            help="A team the principal acts in with this token (repeatable); sessions "
            "shared with the team are open to it"
        ),
    ] = None,
    expires_in: Annotated[
        str | None,
        typer.Option(
            help="Stop accepting it after this long (90s, 30m, 12h, 7d); its open streams then end. "
            "Default: until revoked"
        ),
    ] = None,
    database_url: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Create a token and print it — the only time it is shown."""
    from agentd.infra import create_token, parse_duration, team_names

    use_config(config)
    if not principal.strip():
        raise typer.BadParameter("must not be empty", param_hint="--principal")
    try:
        teams = team_names(t.strip() for t in team or [])
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--team") from None
    try:
        lifetime = parse_duration(expires_in) if expires_in is not None else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--expires-in") from None
    token, record = _with_store(
        database_url, lambda store: create_token(store, principal.strip(), name, teams, lifetime)
    )
    typer.echo(token)
    in_teams = f" in teams {', '.join(record.teams)}" if record.teams else ""
    until = f", expiring {record.expires_at.isoformat()}" if record.expires_at else ""
    typer.echo(
        f"created {record.id} for principal {record.principal!r}{in_teams}{until}; "
        "store it now, it is not kept",
        err=True,
    )


@token_app.command("list")
def token_list(database_url: DbOption = None, config: ConfigOption = None) -> None:
    """List tokens (ids, principals, names, states, teams; never the tokens themselves)."""
    use_config(config)
    records = _with_store(database_url, lambda store: store.list_tokens())
    for r in records:
        if r.revoked_at:
            state = f"revoked {r.revoked_at.isoformat()}"
        elif r.expires_at and r.expires_at <= datetime.now(UTC):
            state = f"expired {r.expires_at.isoformat()}"
        else:
            state = f"active until {r.expires_at.isoformat()}" if r.expires_at else "active"
        teams = ",".join(r.teams) or "-"
        typer.echo(f"{r.id}\t{r.principal}\t{r.name or ''}\t{r.created_at.isoformat()}\t{state}\t{teams}")


@token_app.command("revoke")
def token_revoke(
    token_id: Annotated[str, typer.Argument(help="The token's id, as `agentd token list` shows it.")],
    database_url: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Revoke a token: requests presenting it are refused from now on."""
    use_config(config)
    if not _with_store(database_url, lambda store: store.revoke_token(token_id)):
        typer.echo(f"agentd: no active token {token_id}", err=True)
        raise typer.Exit(1)
    typer.echo(f"revoked {token_id}")
