"""Settings from the environment (`AGENTD_*`) and CLI flags (pydantic-settings)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, Field, SecretStr, field_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

# Re-exported from here too (the `as` form makes the re-export explicit for mypy --strict).
from agentd.core import PermissionMode as PermissionMode
from agentd.core import SqliteSynchronous as SqliteSynchronous
from agentd.infra.setting_choices import CONFIG_ENV as CONFIG_ENV
from agentd.infra.setting_choices import DEFAULT_HOST, DEFAULT_MODEL, DEFAULT_PORT
from agentd.infra.setting_choices import AuthMode as AuthMode
from agentd.infra.setting_choices import HttpTransport as HttpTransport
from agentd.infra.setting_choices import LogFormat as LogFormat
from agentd.infra.setting_choices import LogLevel as LogLevel
from agentd.infra.setting_choices import ProviderName as ProviderName
from agentd.infra.setting_choices import ReasoningEffort as ReasoningEffort
from agentd.infra.setting_choices import SandboxNetwork as SandboxNetwork
from agentd.infra.setting_choices import SandboxSetting as SandboxSetting
from agentd.infra.setting_choices import TokenField as TokenField
from agentd.infra.settings_check import async_database_url, unknown_keys

if TYPE_CHECKING:
    from agentd.store import PoolLimits


def redact_url(url: str) -> str:
    """`url` fit for a log line: a password in it becomes `***` (R-X4: secrets never logged)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


class FallbackLane(BaseModel):
    """One more provider lane to rotate to (R-R3)."""

    provider: ProviderName
    model: str
    base_url: str | None = None
    api_key: SecretStr | None = None


class ModelPrice(BaseModel):
    """US dollars per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


class TomlFileSource(PydanticBaseSettingsSource):
    """The optional TOML file named by `AGENTD_CONFIG` (or `agentd --config`): top-level
    keys are the settings' names without the prefix (`port = 9000`, `[prices."gpt-4o"]`).
    A key that is not a setting is an error, not silently ignored: a typo must not
    quietly leave a default in force."""

    def __init__(self, settings_cls: type[BaseSettings]) -> None:
        super().__init__(settings_cls)
        self.data: dict[str, Any] = {}
        raw = os.environ.get(CONFIG_ENV)
        if not raw:
            return
        import tomllib  # only with a config file (idle RSS: issue 32 item 3)

        path = Path(raw).expanduser()
        try:
            self.data = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise ValueError(f"config file {path} does not exist ({CONFIG_ENV})") from None
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ValueError(f"config file {path}: {exc}") from None
        unknown = unknown_keys(set(self.data) - {"config"}, settings_cls.model_fields)
        if unknown:
            raise ValueError(
                f"config file {path}: " + "; ".join(u.line().replace("ignored", "refused") for u in unknown)
            )

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return self.data.get(field_name), field_name, False

    def __call__(self) -> dict[str, Any]:
        return dict(self.data)


class Settings(BaseSettings):
    """Secrets (API keys, the database URL) are `SecretStr`: their repr, `str()` and JSON dump show
    `**********`; only the code that sends one calls `.get_secret_value()`."""

    model_config = SettingsConfigDict(env_prefix="AGENTD_", extra="ignore")

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    auth: AuthMode = AuthMode.NONE  # R-X1; a non-loopback host requires `token`
    log_level: LogLevel = LogLevel.INFO
    log_format: LogFormat = LogFormat.TEXT
    # Web pages allowed to connect (R-X4), e.g. ["https://app.example.com"]; "*" allows any.
    # Requests without an Origin header (not from a browser) are always let through.
    allowed_origins: list[str] = Field(default_factory=list)
    # Host names the server answers to besides the loopback ones when AGENTD_AUTH=none
    # (DNS-rebinding protection); with tokens any Host is accepted unless this is set.
    allowed_hosts: list[str] = Field(default_factory=list)
    home: Path = Field(default_factory=lambda: Path.home() / ".agentd")
    # Default: sqlite+aiosqlite:///<home>/agentd.db. Secret: a Postgres URL may hold a password.
    database_url: SecretStr | None = None
    # Durability of SQLite commits; `full` for power-loss safety at some commit latency.
    sqlite_synchronous: SqliteSynchronous = SqliteSynchronous.NORMAL
    # A turn's small SQLite commits run on the event loop's thread: less CPU than the hop to
    # the writer thread, but the loop no longer works beside the commit (issue 32: ~4 % less
    # CPU per turn, p50 of tool turns up under load). Off: every commit on the writer thread.
    sqlite_inline_commit: bool = False

    # The store's asyncio engine: agentd's own (`agentd/store/aio.py`, no SQLAlchemy ORM
    # imported: less idle memory) or SQLAlchemy's `sqlalchemy.ext.asyncio` (the library path).
    store_async_engine: Literal["agentd", "sqlalchemy"] = "agentd"
    workspace_root: Path | None = None  # sessions' cwd must lie inside it when set
    # With AGENTD_AUTH=token each principal works under <workspace root>/<principal>
    # (default root: <home>/workspaces); this grants extra roots: {"alice": ["/srv/repo"]}.
    workspace_grants: dict[str, list[Path]] = Field(default_factory=dict)
    # The stdio MCP commands clients may declare (exact names or paths, "*": any) and the
    # HTTP MCP URLs they may reach (prefixes, "*": any), in every auth mode. Unset: any
    # without auth (the local user), none with AGENTD_AUTH=token.
    mcp_allowed_commands: list[str] | None = None
    mcp_allowed_urls: list[str] | None = None
    # Stdio MCP commands that run outside the sandbox (as the server's user); every other
    # one runs under the same sandbox as `bash`. Comma-separated or a JSON list.
    mcp_unsandboxed: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # How long each MCP server of a session may take to start (they start in parallel); a
    # slower one is left out and reported. A server's `_meta.agentd.startTimeoutSeconds`
    # overrides it.
    mcp_start_timeout_s: float = Field(default=30.0, gt=0)
    # How often open WebSockets, SSE streams, Streamable HTTP connections and forwarded
    # commands re-check their token (a revoked one ends them, also when revoked by `agentd
    # token revoke` from another process): one query per replica, only while some are open.
    token_recheck_s: float = Field(default=0.5, gt=0)

    provider: ProviderName | None = None  # None → the scripted demo provider
    model: str = DEFAULT_MODEL
    openai_base_url: str = "https://api.openai.com/v1"
    openai_api_key: SecretStr | None = None
    # Chat Completions: the output-token cap's field name (a 400 naming it switches once).
    openai_token_field: TokenField = TokenField.AUTO
    reasoning_effort: ReasoningEffort | None = None  # None: the model's default
    # Stream timeouts (seconds, 0 = off): until the first token, then between two reads.
    # 003 (octos AgentConfig): "first-token grace 180s、stream idle 90s、LLM call max 1200s";
    # the per-call maximum is `limits.retry.call_max_s`.
    first_token_timeout_s: float = Field(default=180.0, ge=0)
    stream_idle_timeout_s: float = Field(default=90.0, ge=0)
    # Both honour HTTPS_PROXY / HTTP_PROXY / NO_PROXY.
    http_transport: HttpTransport = HttpTransport.LEAN
    anthropic_base_url: str = "https://api.anthropic.com"
    anthropic_api_key: SecretStr | None = None
    # Prompt caching (cache_control breakpoints on tools, system prompt and conversation tail).
    anthropic_prompt_cache: bool = True
    # Extended thinking budget in tokens (0: off; the API's minimum is 1024).
    anthropic_thinking_budget: int = Field(default=0, ge=0)
    # Adaptive thinking (the model decides how much; newer models take only this kind).
    anthropic_adaptive_thinking: bool = False
    script: Path | None = None  # scripted-provider script; default: the built-in demo

    permission_mode: PermissionMode = PermissionMode.DEFAULT
    system_prompt: str = (
        "You are agentd, a careful coding agent working in the user's workspace. "
        "Use the tools to inspect and change files; keep answers short."
    )

    # Context window (tokens) of the model; compaction starts at 85 % of it (R-L3d).
    context_window: int = 128_000
    context_windows: dict[str, int] = Field(default_factory=dict)  # per model, overrides the above

    # Tool rounds one prompt may run (None: no cap for interactive sessions).
    max_turns: int | None = None
    # A folder of skills: `<name>.md` files; `/name args` expands into a prompt (R-S6).
    skills_dir: Path | None = None
    # A folder of agent definitions (*.toml, *.md with front matter); see agentd/agents/loader.py.
    agents_dir: Path | None = None
    # A small, cheap model tried first by the goal evaluator (R-L2c); then the session model.
    goal_evaluator_model: str | None = None
    goal_attempt_timeout_s: float = 30.0  # per evaluator attempt
    # Sub-agents (R-T11, the `task` tool): how deep children may nest (1: only the session's
    # agent starts them; 0: no `task` tool) and how many run at once per session.
    subagent_max_depth: int = Field(default=1, ge=0)
    subagent_max_concurrent: int = Field(default=4, ge=1)
    # A client-registered stop hook that does not answer within this is ignored (fails open).
    client_hook_timeout_s: float = 30.0

    # Overrides of any loop constant, as JSON: {"section": {"field": value}} (agentd/loop/limits.py).
    limits: dict[str, dict[str, Any]] = Field(default_factory=dict)

    # Budget gates (R-B1), checked at the top of every sampling round. Interactive
    # sessions have no iteration cap; headless runs and sub-agents use 50.
    max_iterations: int | None = None
    idle_progress_s: float | None = 300.0
    activity_timeout_s: float | None = 1800.0
    token_budget: int | None = None
    # Provider chain (R-R3): lanes to rotate to, as JSON in AGENTD_FALLBACKS.
    fallbacks: list[FallbackLane] = Field(default_factory=list)
    # Prices per model for the usage ledger's cost (R-R4), as JSON in AGENTD_PRICES.
    prices: dict[str, ModelPrice] = Field(default_factory=dict)
    # The OS sandbox of `bash` (agentd/tools/shell/sandbox.py) and its limits per command (0: none).
    sandbox: SandboxSetting = SandboxSetting.AUTO
    sandbox_network: SandboxNetwork = SandboxNetwork.ON
    # Destinations (ADDRESS:PORT) the egress proxy lets sandboxed commands reach although
    # they are loopback or private (a mirror on the LAN); never agentd's own port.
    sandbox_egress_allow: list[str] = Field(default_factory=list)
    # The `web_fetch` tool (agentd/tools/web/; never with AGENTD_SANDBOX_NETWORK=off):
    # public addresses only; allow entries ADDRESS:PORT (one non-public destination) or host
    # patterns (then only those hosts); deny entries host patterns or address ranges.
    web_fetch: bool = True
    web_fetch_allow: Annotated[list[str], NoDecode] = Field(default_factory=list)
    web_fetch_deny: Annotated[list[str], NoDecode] = Field(default_factory=list)
    web_fetch_timeout_s: float = Field(default=30.0, gt=0)
    web_fetch_max_mb: float = Field(default=5.0, gt=0)
    # The model picker lists what the provider serves (its models endpoint), cached this
    # long (0: not asked; only the configured models); patterns limiting what it offers.
    models_ttl_s: float = Field(default=600.0, ge=0)
    models_allow: Annotated[list[str], NoDecode] = Field(default_factory=list)
    sandbox_cpu_s: int = Field(default=3600, ge=0)  # CPU seconds per process
    sandbox_memory_mb: int = Field(default=8192, ge=0)  # data segment per process
    sandbox_file_mb: int = Field(default=4096, ge=0)  # largest file a command may write
    sandbox_procs: int = Field(default=1024, ge=0)  # processes (and threads) per command
    # A command whose output passes this is stopped (its first 64 MiB stay in a log file).
    bash_output_mb: int = Field(default=256, gt=0)
    # TOML file of pre-tool and stop hooks (see agentd/tools/hooks.py).
    hooks_file: Path | None = None

    # Group commit of the event log (R-E2): an idle writer commits at once; under load
    # (writes queued behind the last commit) it may linger this long for larger batches.
    flush_interval_ms: float = 0.0
    # A permission request nobody answers is rejected after this long (seconds).
    permission_timeout_s: float = 3600.0
    # An actor with no clients, no queued or running work is evicted after this (R-S5);
    # it is recreated from the store on demand.
    idle_evict_s: float = Field(default=600.0, ge=0)
    # ...and one holding nothing but its state (no background shell task, no MCP server:
    # it reloads from the store at the next request, in milliseconds) after this shorter
    # grace, so the memory of sessions whose clients left returns soon after a load
    # (issue 32 item 3). Set it to `idle_evict_s` to keep every idle session as long.
    detached_evict_s: float = Field(default=30.0, ge=0)
    # How often the server may hand freed memory back to the OS after growing (0: never).
    memory_trim_s: float = 10.0
    # Once started, new objects come from the C library's malloc, whose free pages the trim
    # returns after a load; pymalloc's arenas stay pinned by a few survivors (infra/small_alloc.py).
    malloc_after_start: bool = True
    # On shutdown, running turns get this long to stop at their next budget gate, then
    # are cancelled (R-S5); waiting requests are answered before connections close.
    shutdown_grace_s: float = 10.0

    # How long a request for a session whose previous actor is still stopping (close,
    # delete, eviction on a slow database) waits for it before a retryable -32019.
    session_stop_wait_s: float = 10.0
    # Several replicas on one Postgres (R-C1): each session is owned by one replica at a
    # time, under a lease renewed every third of `lease_ttl_s`; another replica takes the
    # session over once it expired. `replica_id` names this process in the lease table
    # (empty: hostname-pid-random). SQLite is single-process: no leases.
    replica_id: str = ""
    lease_ttl_s: float = Field(default=10.0, gt=0)
    # A command for a session another replica owns is forwarded to it (R-C1); the caller
    # gets a retryable error when no answer came within this time (a prompt waits for its
    # turn's end instead, as long as the owner holds the session).
    routed_command_timeout_s: float = Field(default=30.0, gt=0)
    # Start-up waits at most this long for another replica migrating the database, then
    # stops with an error naming the lock's holder (agentd/store/migration_lock.py).
    migration_lock_timeout_s: float = Field(default=120.0, gt=0)
    # What is live only — streamed text and other transient events of a session, for the
    # clients of replicas that do not own it — goes through Redis pub/sub when this is set
    # (redis://host:port/db), else through Postgres NOTIFY (issue 26). No data lives there.
    redis_url: str = ""
    # A replica watching a session another owns announces it on the broker this often; the
    # owner sends the session's live events only until twice this after the last one.
    live_watch_interval_s: float = Field(default=10.0, gt=0)
    # Database pool: a request waits for a connection until its deadline (`request_deadline_s`
    # after it arrived: a burst queues), then gets a retryable -32019 (overloaded); work that
    # is no request (a session's turn) waits at most `db_pool_timeout_s`. Postgres statements
    # time out after `db_statement_timeout_s` (SQLite waits busy_timeout for a lock). At most
    # size + overflow connections, each kept once opened (a burst does not reconnect).
    db_pool_size: int = 5
    db_pool_overflow: int = 10
    db_pool_timeout_s: float = 5.0
    db_statement_timeout_s: float = 30.0
    request_deadline_s: float = Field(default=30.0, gt=0)

    # A hold on a queued prompt (a user editing it) runs out after this (R-S3).
    queue_hold_s: float = 600.0

    # Queued prompts left by a previous run start again by themselves (R-E6).
    auto_resume: bool = True

    # A background task that ends by itself while the session is idle starts a turn (source
    # `task_notification`), at most this many in a row without a user prompt (wake.py).
    wake_on_task_finish: bool = True
    wake_max_consecutive: int = Field(default=3, ge=0)

    # SSE comment frames keep idle streams (and proxies) alive.
    sse_heartbeat_s: float = 15.0
    # Per-connection outgoing buffer (frames) before the client is told to resync.
    client_buffer_frames: int = 10_000
    # Largest accepted WebSocket text frame / HTTP body (bytes).
    max_frame_bytes: int = 4 * 1024 * 1024
    # permessage-deflate on WebSockets when the client offers it. Off: agentd's frames are
    # small JSON, and compressing each one per client cost more CPU than the rest of sending it.
    ws_compression: bool = False
    # Under uvicorn, a client's ready frames go to the socket in one write (transport/socket_write.py);
    # off: every frame through ASGI's `websocket.send`, the library path (same bytes).
    ws_direct_write: bool = True
    # Under uvicorn, a client's frames are read from the server's own ASGI `receive`, with
    # Starlette's `receive_text` checks written out; off: through `receive_text` (the library path).
    ws_direct_read: bool = True
    # A client that fell behind gets its queued text chunks of one message merged into one
    # frame each write (transport/outgoing.py `merge_chunks`): off, every chunk its own frame.
    ws_merge_chunks: bool = True
    # File snapshots before tool edits (R-T12): a file over the per-file cap, or past the
    # session's total, is recorded as not restorable (rewind reports it) instead of kept.
    snapshot_max_file_bytes: int = 2 * 1024 * 1024
    snapshot_max_session_bytes: int = 64 * 1024 * 1024
    # Input limits (R-X3); 0 switches one off. Violations get -32019 limit_exceeded.
    max_json_depth: int = 64
    max_prompt_bytes: int = 1024 * 1024
    # Content blocks in one prompt: validating and storing a prompt costs per block, so
    # 50,000 one-character blocks under the byte limit stalled everyone (issue 28 item 4).
    max_prompt_blocks: int = 1000
    max_queue_length: int = 100
    # Bytes of prompt text waiting in queues: per session, and per principal over all its
    # live sessions (a queued prompt costs memory and a row until it runs).
    max_queued_bytes_per_session: int = 16 * 1024 * 1024
    max_queued_bytes_per_principal: int = 64 * 1024 * 1024
    max_sessions_per_principal: int = 10_000
    # Requests per principal (without auth: per connection, or per address over HTTP)...
    rate_limit_per_s: float = 50.0  # ...on average...
    rate_limit_burst: int = 200  # ...with bursts up to this

    @field_validator("database_url", mode="before")
    @classmethod
    def _async_driver(cls, value: Any) -> Any:
        # postgres:// and postgresql:// (what hosting panels hand out) run on asyncpg.
        return async_database_url(value) if isinstance(value, str) else value

    @field_validator("mcp_unsandboxed", "web_fetch_allow", "web_fetch_deny", "models_allow", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if isinstance(value, str):  # `a,b` (as the environment spells it) or a JSON list
            text = value.strip()
            if text.startswith("["):
                return json.loads(text)
            return [name.strip() for name in text.split(",") if name.strip()]
        return value

    @field_validator("anthropic_thinking_budget")
    @classmethod
    def _thinking_budget(cls, value: int) -> int:
        if 0 < value < 1024:
            raise ValueError("must be 0 (off) or at least 1024 tokens, the API's minimum")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Flags beat the environment, which beats the TOML file, which beats the defaults.
        return init_settings, env_settings, TomlFileSource(settings_cls), file_secret_settings

    def context_window_for(self, model: str) -> int:
        return self.context_windows.get(model, self.context_window)

    def pool_limits(self) -> PoolLimits:
        from agentd.store import PoolLimits

        return PoolLimits(
            self.db_pool_size, self.db_pool_overflow, self.db_pool_timeout_s, self.db_statement_timeout_s
        )

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url.get_secret_value()
        return f"sqlite+aiosqlite:///{self.home / 'agentd.db'}"
