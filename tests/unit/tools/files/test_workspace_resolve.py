"""Workspace confinement's two paths (issue 32): the string realpath (the default) answers
exactly as `Path.resolve` + `is_relative_to` (`AGENTD_WORKSPACE_RESOLVE=pathlib`) — the same
path, or the same refusal with the same message — on every kind of path a model may send."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentd.tools import ToolError
from agentd.tools.files import workspace
from agentd.tools.files.workspace import display_path, resolve_and_display, resolve_in_workspace


@pytest.fixture
def tree(tmp_path: Path) -> tuple[Path, Path]:
    """(workspace root, as reached through a symlink; a directory outside it)."""
    real = tmp_path / "real-ws"
    (real / "src" / "pkg").mkdir(parents=True)
    (real / "src" / "pkg" / "mod.py").write_text("x = 1\n")
    (real / "notes.txt").write_text("hi\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("no\n")
    (real / "link-in").symlink_to(real / "src")
    (real / "link-out").symlink_to(outside)
    (real / "file-out").symlink_to(outside / "secret")
    (real / "dangling").symlink_to(real / "nowhere" / "file")
    (real / "dangling-out").symlink_to(outside / "nowhere")
    (real / "loop-a").symlink_to(real / "loop-b")
    (real / "loop-b").symlink_to(real / "loop-a")
    (tmp_path / "real-ws-sibling").mkdir()  # shares the root's name as a prefix
    root = tmp_path / "ws-link"
    root.symlink_to(real)
    return root, outside


PATHS = [
    "notes.txt",
    "./notes.txt",
    "src//pkg/./mod.py",
    "src/pkg/",
    "src/pkg/../pkg/mod.py",
    "link-in/pkg/mod.py",
    "link-in/../notes.txt",  # `..` after a symlink: realpath's meaning, not the text's
    "new/dir/file.txt",
    "dangling",
    ".",
    "..",
    "../real-ws-sibling",
    "../outside/secret",
    "link-out/secret",
    "file-out",
    "dangling-out",
    "loop-a",
    "loop-a/x",
    "bad\x00name",
    "/",
    "/etc/passwd",
    "//etc",
]


def _answer(root: Path, path: str) -> tuple[str, str]:
    try:
        resolved = resolve_in_workspace(root, path)
    except ToolError as exc:
        return "refused", str(exc)
    assert isinstance(resolved, Path)
    return "path", f"{resolved}|{display_path(root, resolved)}"


@pytest.mark.parametrize("path", [*PATHS, "{root}/notes.txt", "{root}/../outside/secret", "{real}/src"])
def test_both_paths_answer_alike(tree: tuple[Path, Path], path: str, monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = tree
    path = path.format(root=root, real=root.resolve())
    monkeypatch.setattr(workspace, "LIBRARY_RESOLVE", True)
    expected = _answer(root, path)
    monkeypatch.setattr(workspace, "LIBRARY_RESOLVE", False)
    assert _answer(root, path) == expected


@pytest.mark.parametrize("library", [False, True])
def test_what_each_path_decides(
    tree: tuple[Path, Path], library: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only alike: right. Inside stays inside (symlinks followed), outside is refused."""
    root, _ = tree
    real = root.resolve()
    monkeypatch.setattr(workspace, "LIBRARY_RESOLVE", library)
    assert resolve_in_workspace(root, "link-in/pkg/mod.py") == real / "src" / "pkg" / "mod.py"
    assert resolve_in_workspace(root, "new/file") == real / "new" / "file"
    assert display_path(root, real / "src" / "pkg") == "src/pkg"
    assert display_path(root, real) == "."
    assert display_path(root, Path("/etc/passwd")) == "/etc/passwd"
    for escape in ("../real-ws-sibling", "link-out/secret", "file-out", "dangling-out", "/etc"):
        with pytest.raises(ToolError, match="outside the workspace"):
            resolve_in_workspace(root, escape)
    with pytest.raises(ToolError, match="cannot resolve"):
        resolve_in_workspace(root, "loop-a")
    with pytest.raises(ToolError, match="must be a non-empty string"):
        resolve_in_workspace(root, "  ")


@pytest.mark.parametrize("library", [False, True])
@pytest.mark.parametrize(
    "path", [*PATHS, "{root}/notes.txt", "{root}/../outside/secret", "{real}/src", "{real}"]
)
def test_resolve_and_display_is_the_two_calls(
    tree: tuple[Path, Path], path: str, library: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`resolve_and_display` (the file tools' one resolve of the root per call) gives what
    `resolve_in_workspace` then `display_path` give: the same path and text, or the same refusal."""
    root, _ = tree
    path = path.format(root=root, real=root.resolve())
    monkeypatch.setattr(workspace, "LIBRARY_RESOLVE", library)
    expected = _answer(root, path)
    try:
        resolved, shown = resolve_and_display(root, path)
    except ToolError as exc:
        assert expected == ("refused", str(exc))
    else:
        assert isinstance(resolved, Path)
        assert expected == ("path", f"{resolved}|{shown}")


@pytest.mark.parametrize("path", [p for p in PATHS if not p.startswith("/")] + ["notes.txt/x", "src/pkg/new"])
def test_realpath_below_the_root_is_realpath_of_the_join(tree: tuple[Path, Path], path: str) -> None:
    """A relative path is resolved below the root's realpath without walking the root again
    (issue 32): the same answer as realpath of the whole join, symlinks and `..` included."""
    root, _ = tree
    real_root = workspace._realpath(root)
    try:
        expected = workspace._realpath(os.path.join(real_root, path))
    except (RuntimeError, ValueError) as exc:
        with pytest.raises(type(exc)):
            workspace._realpath_below(real_root, path)
    else:
        assert workspace._realpath_below(real_root, path) == expected


def test_realpath_below_the_filesystem_root() -> None:
    assert workspace._realpath_below("/", "etc/passwd") == os.path.realpath("/etc/passwd")
