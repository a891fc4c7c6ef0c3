"""The ACP frame validator used by end-to-end tests must be able to fail: prove it does."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.acp_schema import (
    SCHEMA_ENV,
    AcpSchemaError,
    AcpValidator,
    find_null_fields,
    find_snake_case_keys,
    schema_path,
)


@pytest.fixture(scope="module")
def v() -> AcpValidator:
    return AcpValidator.default()


def update(upd: dict[str, Any], **params: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s1", "update": upd, **params},
    }


CHUNK = update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hello"}})

PERMISSION_REQUEST = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "session/request_permission",
    "params": {
        "sessionId": "s1",
        "toolCall": {
            "toolCallId": "call_1",
            "title": "Run python3 hello.py",
            "kind": "execute",
            "status": "pending",
        },
        "options": [
            {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
            {"optionId": "allow_always", "name": "Always allow", "kind": "allow_always"},
            {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
        ],
    },
}


def problems_of(excinfo: pytest.ExceptionInfo[AssertionError]) -> str:
    assert isinstance(excinfo.value, AcpSchemaError)
    return "\n".join(excinfo.value.problems)


# -- agent frames ----------------------------------------------------------------------


def test_valid_agent_message_chunk_passes(v: AcpValidator) -> None:
    v.validate_agent_frame(CHUNK, {})
    v.assert_valid_agent_frame(CHUNK, {})


def test_snake_case_session_id_fails(v: AcpValidator) -> None:
    frame = copy.deepcopy(CHUNK)
    frame["params"]["session_id"] = frame["params"].pop("sessionId")
    with pytest.raises(AssertionError) as info:
        v.validate_agent_frame(frame, {})
    assert "'sessionId' is a required property" in problems_of(info)

    # Even alongside the right key (the schema allows extra properties) the leak is caught.
    frame["params"]["sessionId"] = "s1"
    v.validate_agent_frame(frame, {})
    with pytest.raises(AssertionError) as info:
        v.assert_valid_agent_frame(frame, {})
    assert "params.session_id: snake_case key" in problems_of(info)


def test_initialize_response_with_wrong_type_fails(v: AcpValidator) -> None:
    ok = {
        "jsonrpc": "2.0",
        "id": 0,
        "result": {
            "protocolVersion": 1,
            "agentCapabilities": {"loadSession": True, "promptCapabilities": {"image": False}},
            "authMethods": [],
            "agentInfo": {"name": "agentd", "version": "0.1.0"},
        },
    }
    v.assert_valid_agent_frame(ok, {0: "initialize"})

    bad = copy.deepcopy(ok)
    bad["result"]["protocolVersion"] = "1"
    with pytest.raises(AssertionError) as info:
        v.assert_valid_agent_frame(bad, {0: "initialize"})
    assert "result.protocolVersion: '1' is not of type 'integer'" in problems_of(info)

    bad = copy.deepcopy(ok)
    bad["result"]["agentCapabilities"]["loadSession"] = "yes"
    with pytest.raises(AssertionError, match=r"result\.agentCapabilities\.loadSession"):
        v.assert_valid_agent_frame(bad, {0: "initialize"})


def test_prompt_response_stop_reason(v: AcpValidator) -> None:
    methods = {3: "session/prompt"}
    v.assert_valid_agent_frame({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}}, methods)
    with pytest.raises(AssertionError) as info:
        v.assert_valid_agent_frame({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "finished"}}, methods)
    text = problems_of(info)
    assert "result.stopReason: 'finished' is not one of" in text and "'end_turn'" in text
    with pytest.raises(AssertionError, match="stop_reason: snake_case"):
        v.assert_valid_agent_frame(
            {"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn", "stop_reason": "end_turn"}},
            methods,
        )


def test_null_optional_field_is_reported(v: AcpValidator) -> None:
    frame = copy.deepcopy(CHUNK)
    frame["params"]["update"]["messageId"] = None  # the schema itself allows null here
    with pytest.raises(AssertionError) as info:
        v.validate_agent_frame(frame, {})
    assert "params.update.messageId: null value" in problems_of(info)

    frame = copy.deepcopy(CHUNK)
    frame["params"]["_meta"] = None
    with pytest.raises(AssertionError, match=r"params\._meta: null value"):
        v.validate_agent_frame(frame, {})


def test_nulls_with_a_meaning_are_allowed(v: AcpValidator) -> None:
    # session_info_update has patch semantics: null clears the title.
    v.assert_valid_agent_frame(update({"sessionUpdate": "session_info_update", "title": None}), {})
    # Free-form tool I/O may contain anything.
    v.assert_valid_agent_frame(
        update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_1",
                "status": "completed",
                "rawOutput": {"exit_code": 0, "stderr": None},
            }
        ),
        {},
    )


def test_request_permission_request(v: AcpValidator) -> None:
    v.assert_valid_agent_frame(PERMISSION_REQUEST, {})

    bad = copy.deepcopy(PERMISSION_REQUEST)
    bad["params"]["options"][1]["kind"] = "allow_forever"
    with pytest.raises(AssertionError, match=r"params\.options\[1\]\.kind: 'allow_forever' is not one of"):
        v.assert_valid_agent_frame(bad, {})

    bad = copy.deepcopy(PERMISSION_REQUEST)
    del bad["params"]["options"]
    with pytest.raises(AssertionError, match="'options' is a required property"):
        v.assert_valid_agent_frame(bad, {})


def test_tagged_union_errors_point_at_the_chosen_branch(v: AcpValidator) -> None:
    with pytest.raises(AssertionError) as info:
        v.validate_agent_frame(
            update({"sessionUpdate": "agent_message_chunk", "content": {"type": "text"}}), {}
        )
    assert problems_of(info) == "params.update.content: 'text' is a required property"

    with pytest.raises(AssertionError) as info:
        v.validate_agent_frame(update({"sessionUpdate": "agent_reply", "content": {}}), {})
    assert "sessionUpdate must be one of" in problems_of(info)


def test_direction_and_kind_of_method_are_checked(v: AcpValidator) -> None:
    prompt = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "session/prompt",
        "params": {"sessionId": "s1", "prompt": []},
    }
    with pytest.raises(AssertionError, match="handled by the agent, so the agent must not send it"):
        v.validate_agent_frame(prompt, {})
    with pytest.raises(AssertionError, match="must be sent without an id"):
        v.validate_agent_frame({**CHUNK, "id": 5}, {})
    with pytest.raises(AssertionError, match="unknown ACP method"):
        v.validate_agent_frame({"jsonrpc": "2.0", "method": "session/frobnicate", "params": {}}, {})


def test_envelope(v: AcpValidator) -> None:
    with pytest.raises(AssertionError, match=r'jsonrpc: must be "2\.0"'):
        v.validate_agent_frame({k: val for k, val in CHUNK.items() if k != "jsonrpc"}, {})
    with pytest.raises(AssertionError, match="unexpected top-level keys"):
        v.validate_agent_frame({**CHUNK, "session": "s1"}, {})
    with pytest.raises(AssertionError, match="answers no known request"):
        v.validate_agent_frame({"jsonrpc": "2.0", "id": 9, "result": {}}, {1: "session/new"})
    with pytest.raises(AssertionError, match="exactly one of result and error"):
        v.validate_agent_frame({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {}}, {1: "session/new"})


def test_error_responses(v: AcpValidator) -> None:
    v.assert_valid_agent_frame({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad"}}, {})
    v.assert_valid_agent_frame(
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse"}}, {}
    )
    with pytest.raises(AssertionError) as info:
        v.assert_valid_agent_frame({"jsonrpc": "2.0", "id": 1, "error": {"code": "E1", "message": 5}}, {})
    text = problems_of(info)
    assert "error.code: 'E1' is not of type 'integer'" in text
    assert "error.message: 5 is not of type 'string'" in text


def test_extension_methods_check_only_the_envelope(v: AcpValidator) -> None:
    ext = {"jsonrpc": "2.0", "id": 4, "method": "_agentd/session/attach", "params": {"anything": [1, 2]}}
    v.assert_valid_client_frame(ext, {})
    v.assert_valid_agent_frame(
        {"jsonrpc": "2.0", "id": 4, "result": {"events": []}}, {4: "_agentd/session/attach"}
    )
    with pytest.raises(AssertionError, match=r"params\.afterSeq: null value"):
        v.assert_valid_client_frame({**ext, "params": {"afterSeq": None}}, {})
    with pytest.raises(AssertionError, match=r'jsonrpc: must be "2\.0"'):
        v.assert_valid_client_frame({**ext, "jsonrpc": "1.0"}, {})


# -- client frames ---------------------------------------------------------------------


def test_client_frames(v: AcpValidator) -> None:
    v.assert_valid_client_frame(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/prompt",
            "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]},
        },
        {},
    )
    v.assert_valid_client_frame(
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s1"}}, {}
    )
    methods = {7: "session/request_permission"}
    selected = {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
    }
    v.assert_valid_client_frame(selected, methods)
    v.assert_valid_client_frame(
        {"jsonrpc": "2.0", "id": 7, "result": {"outcome": {"outcome": "cancelled"}}}, methods
    )
    with pytest.raises(AssertionError, match=r"result\.outcome: 'optionId' is a required property"):
        v.assert_valid_client_frame(
            {"jsonrpc": "2.0", "id": 7, "result": {"outcome": {"outcome": "selected"}}}, methods
        )
    with pytest.raises(AssertionError, match="handled by the client, so the client must not send it"):
        v.validate_client_frame(CHUNK, {})


# -- helpers ---------------------------------------------------------------------------


def test_find_snake_case_keys() -> None:
    obj = {
        "sessionId": "s",
        "_meta": {"trace_id": "x", "deep": {"any_thing": 1}},
        "_agentd_ext": {"ok": True},
        "update": {
            "sessionUpdate": "tool_call",
            "tool_call_id": "c1",
            "rawInput": {"old_string": "a"},
            "rawOutput": [{"exit_code": 0}],
            "content": [{"type": "diff", "old_text": "a"}],
        },
    }
    assert find_snake_case_keys(obj) == ["update.tool_call_id", "update.content[0].old_text"]
    assert find_snake_case_keys({"a": 1}, "params") == []
    assert find_snake_case_keys([{"stop_reason": 1}], "result") == ["result[0].stop_reason"]


def test_find_null_fields() -> None:
    obj = {"a": None, "b": {"c": None, "_meta": {"free": None}}, "exitCode": None, "l": [{"d": None}]}
    assert find_null_fields(obj) == ["a", "b.c", "l[0].d"]


def test_validators_are_cached(v: AcpValidator) -> None:
    assert v.validator_for("PromptResponse") is v.validator_for("PromptResponse")
    with pytest.raises(KeyError):
        v.validator_for("NoSuchThing")


def test_schema_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SCHEMA_ENV, raising=False)
    default = schema_path()
    assert default.is_file() and default.parts[-4:] == ("tests", "support", "acp", "schema-v1.json")

    copied = tmp_path / "acp.json"
    shutil.copy(default, copied)
    monkeypatch.setenv(SCHEMA_ENV, str(copied))
    assert schema_path() == copied
    AcpValidator().assert_valid_agent_frame(CHUNK, {})

    monkeypatch.setenv(SCHEMA_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(FileNotFoundError, match=SCHEMA_ENV):
        AcpValidator()
