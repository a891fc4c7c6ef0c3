import sys
import types

__version__ = "0.1.0"


def _httpx_without_its_cli() -> None:
    """`import httpx` imports its command-line client when rich, click and pygments are
    installed (typer brings them): ~80 modules and ~6 MiB resident in every server that
    talks to a model, for a command it never runs. A stand-in `httpx._main` is put in
    first; its `main` drops itself and runs the real one, so `httpx.main()` still works."""
    if "httpx" in sys.modules or "httpx._main" in sys.modules:
        return
    stand_in = types.ModuleType("httpx._main")

    def main() -> None:
        if sys.modules.get("httpx._main") is stand_in:
            del sys.modules["httpx._main"]
        from httpx._main import main as real

        real()

    stand_in.main = main  # type: ignore[attr-defined]
    sys.modules["httpx._main"] = stand_in


_httpx_without_its_cli()
