"""bench/spy_split.py over hand-made py-spy raw text: threads told apart by id and name, the
loop's samples put in the layer of their innermost frame, its top functions by self samples."""

from __future__ import annotations

from tests.support.bench_modules import bench_module

spy = bench_module("spy_split")
PID = 100
RAW = "\n".join(
    [
        "thread (100): MainThread;<module> (<string>:2);Runner.run (asyncio/runners.py:118) 7",
        "thread (100): MainThread;Runner.run (asyncio/runners.py:118);"
        "SocketWriter.write (agentd/transport/socket_write.py:98) 3",
        "thread (100): MainThread;EventWriter._run (/srv/tree/agentd/session/eventlog/writer.py:3) 2",
        "thread (100): MainThread;send (websockets/asyncio/connection.py:1) 1",
        "thread (100): MainThread;__init__ (pydantic/main.py:1) 1",
        "thread (100): MainThread;_do_execute (asyncpg/connection.py:1) 1",
        "thread (100): MainThread;x (starlette/routing.py:1);y (fastapi/routing.py:1) 1",
        "thread (100): MainThread;__init__ (<string>:3) 1",
        "thread (100): MainThread;get (json/decoder.py:1) 1",
        "thread (100): MainThread;_joinrealpath (<frozen posixpath>:1) 1",
        "thread (100): MainThread;loads (orjsonish/__init__.py:1) 1",
        "thread (100): MainThread;Relay.turn (floor_relay.py:224) 1",
        "thread (100): MainThread;main (agentd/cli/__init__.py:51) 1",
        "thread (100): MainThread 2",
        "thread (101): store-writer;commit (agentd/store/sqlite_commit.py:5) 4",
        "thread (102): agentd-files_0;read (pathlib.py:1) 2",
        "not a stack line",
        "",
    ]
)


def test_threads_split_loop_writer_other() -> None:
    s = spy.split(RAW, PID)
    assert s.threads == {"loop": 24, "writer": 4, "other": 2}
    assert s.names == {"agentd-files_0": 2}
    assert s.total == 30


def test_the_loop_by_the_layer_of_its_innermost_frame() -> None:
    layers = spy.split(RAW, PID).layers
    assert layers == {
        "uvloop C": 7,
        "transport": 3,
        "session": 2,
        "websockets": 1,
        "pydantic": 1,
        "asyncpg": 1,
        "starlette/fastapi": 1,
        "generated (<string>)": 1,
        "stdlib": 2,
        "other libraries": 1,
        "relay": 1,
        "agentd other": 1,
        "no Python frame": 2,
    }


def test_only_runner_run_innermost_is_uvloop_c() -> None:
    assert spy.layer("asyncio/runners.py", "Runner.run") == "uvloop C"
    assert spy.layer("asyncio/runners.py", "Runner.close") == "stdlib"
    assert spy.layer("asyncio/tasks.py", "create_task") == "stdlib"
    assert spy.layer("/tmp/base-x/agentd/store/db.py", "Store.commit") == "store"
    assert spy.layer("uvicorn/protocols/websockets/x.py", "f") == "uvicorn"
    assert spy.layer("prometheus_client/metrics.py", "inc") == "prometheus"
    assert spy.layer("sqlalchemy/engine/base.py", "f") == "sqlalchemy"


def test_top_functions_by_self_samples_of_the_loop_only() -> None:
    functions = spy.split(RAW, PID).functions
    assert functions.most_common(2) == [
        ("asyncio/runners.py:Runner.run", 7),
        ("agentd/transport/socket_write.py:SocketWriter.write", 3),
    ]
    assert "agentd/store/sqlite_commit.py:commit" not in functions  # the writer's


def test_report_prints_per_turn_figures() -> None:
    lines = spy.report("agentd", spy.split(RAW, PID), turns=10, top=2)
    assert lines[0] == "agentd samples/turn 3.00: loop 2.40, writer 0.40, other 0.20 (agentd-files_0 0.20)"
    assert lines[1].startswith("agentd loop by layer: uvloop C 0.70 (29%), transport 0.30 (12%)")
    assert lines[2:] == [
        "agentd loop self   0.70 29.2% asyncio/runners.py:Runner.run",
        "agentd loop self   0.30 12.5% agentd/transport/socket_write.py:SocketWriter.write",
    ]
