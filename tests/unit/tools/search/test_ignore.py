"""Git's ignore rules (agentd/tools/search/ignore.py): nested .gitignore files, negation, dir-only
and anchored patterns, .git/info/exclude, the global excludes file; checked against git
itself where it is installed."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from agentd.tools.search.ignore import IgnoreRules, find_top, global_excludes_path


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A clean HOME and XDG_CONFIG_HOME: the machine's own git config must not leak in."""
    h = tmp_path / "home"
    (h / ".config").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(h / ".config"))
    monkeypatch.delenv("GIT_DIR", raising=False)
    return h


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root.resolve()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git" / "info").mkdir(parents=True)
    return root.resolve()


def test_nested_files_negation_and_precedence(repo: Path) -> None:
    _tree(repo, {
        ".gitignore": "*.log\n*.gen\n/root_only\nbuild/\n*.tmp\n!important.tmp\n",
        "sub/.gitignore": "!keep.log\n!*.gen\nlocal.txt\n",
    })  # fmt: skip
    rules = IgnoreRules(repo)
    assert rules.ignored("a.log", is_dir=False)
    assert rules.ignored("sub/x.log", is_dir=False)
    assert not rules.ignored("sub/keep.log", is_dir=False)  # a deeper file re-includes
    assert not rules.ignored("sub/a.gen", is_dir=False) and rules.ignored("a.gen", is_dir=False)
    assert rules.ignored("sub/local.txt", is_dir=False) and not rules.ignored("local.txt", is_dir=False)
    assert rules.ignored("x.tmp", is_dir=False) and not rules.ignored("important.tmp", is_dir=False)
    assert rules.ignored("root_only", is_dir=False)  # anchored to its .gitignore's directory
    assert not rules.ignored("sub/root_only", is_dir=False)
    # Dir-only patterns: a directory named build anywhere, not a file of that name.
    assert rules.ignored("build", is_dir=True) and rules.ignored("sub/build", is_dir=True)
    assert not rules.ignored("build", is_dir=False)


def test_info_exclude_and_global_excludes(repo: Path, home: Path) -> None:
    _tree(repo, {".git/info/exclude": "secret.txt\nshared.txt\n", ".gitignore": "!shared.txt\n"})
    (home / ".config" / "git").mkdir()
    (home / ".config" / "git" / "ignore").write_text("*.swp\n")
    rules = IgnoreRules(repo)
    assert rules.ignored("secret.txt", is_dir=False) and rules.ignored("d/secret.txt", is_dir=False)
    assert not rules.ignored("shared.txt", is_dir=False)  # .gitignore outranks info/exclude
    assert rules.ignored("notes.swp", is_dir=False)  # $XDG_CONFIG_HOME/git/ignore

    # core.excludesFile (later config files win, "~/" expands) replaces the default file.
    (home / ".gitconfig").write_text('[user]\n\tname = x\n[core]\n\texcludesFile = "~/my-ignores"\n')
    (home / "my-ignores").write_text("*.bak\n")
    assert global_excludes_path() == home / "my-ignores"
    rules = IgnoreRules(repo)
    assert rules.ignored("a.bak", is_dir=False) and not rules.ignored("a.swp", is_dir=False)


def test_without_a_repository_the_workspace_is_the_top(tmp_path: Path) -> None:
    ws = _tree(tmp_path / "plain", {".gitignore": "dist/\n"})
    assert find_top(ws) == ws
    assert IgnoreRules(ws).ignored("dist", is_dir=True)


def test_a_workspace_inside_a_repository_gets_the_rules_above_it(repo: Path) -> None:
    _tree(repo, {".gitignore": "*.o\npkg/vendor/\n", "pkg/.gitignore": "gen/\n", "pkg/app.c": ""})
    ws = repo / "pkg"
    rules = IgnoreRules(ws)
    assert rules.top == repo
    assert rules.ignored("x.o", is_dir=False)  # from the repository's top .gitignore
    assert rules.ignored("vendor", is_dir=True)  # anchored above the workspace, still right
    assert rules.ignored("gen", is_dir=True)
    assert not rules.ignored("app.c", is_dir=False)
    assert rules.path_ignored("vendor/lib/x.c", is_dir=False)  # below an ignored directory
    assert not rules.path_ignored("src/x.c", is_dir=False)


def test_a_worktree_reads_the_common_info_exclude(tmp_path: Path) -> None:
    main = _tree(
        tmp_path / "main", {".git/info/exclude": "*.secret\n", ".git/worktrees/wt/commondir": "../..\n"}
    )
    wt = tmp_path / "wt"
    wt.mkdir()
    (wt / ".git").write_text(f"gitdir: {main / '.git' / 'worktrees' / 'wt'}\n")
    assert IgnoreRules(wt.resolve()).ignored("k.secret", is_dir=False)


def test_malformed_and_huge_ignore_files_do_not_break_the_rules(repo: Path) -> None:
    _tree(repo, {".gitignore": "ok.txt\n\\\n[unclosed\n" + "# comment\n" * 10})
    rules = IgnoreRules(repo)
    assert rules.ignored("ok.txt", is_dir=False)
    assert not rules.ignored("other.txt", is_dir=False)


GIT_CASES = {
    ".gitignore": "*.log\n!keep.log\n/top.txt\nbuild/\ndoc/**/*.pdf\n**/cache\n#x\n\\#hash\n  \nfoo\\ bar\n",
    "src/.gitignore": "*.gen\n!/special.log\n",
    "src/deep/.gitignore": "!*.gen\n",
    ".git/info/exclude": "excluded*\n",
}
GIT_PATHS = [
    ("a.log", False), ("keep.log", False), ("src/keep.log", False), ("src/special.log", False),
    ("src/deep/special.log", False), ("top.txt", False), ("src/top.txt", False), ("build", True),
    ("src/build", True), ("doc/a/b/c.pdf", False), ("doc/c.pdf", False),
    ("x/cache", True), ("cache", False), ("#hash", False), ("foo bar", False), ("src/a.gen", False),
    ("src/deep/a.gen", False), ("excluded.txt", False), ("src/excluded", True), ("ok.py", False),
]  # fmt: skip


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_agrees_with_git_check_ignore(repo: Path, home: Path) -> None:
    shutil.rmtree(repo / ".git")
    subprocess.run(
        ["git", "init", "-q", str(repo)], check=True, env={"HOME": str(home), "PATH": "/usr/bin:/bin"}
    )
    _tree(repo, GIT_CASES)
    rules = IgnoreRules(repo)
    for rel, is_dir in GIT_PATHS:
        target = repo / rel
        if is_dir:
            target.mkdir(parents=True, exist_ok=True)
        probe = rel + "/" if is_dir else rel
        done = subprocess.run(
            ["git", "-C", str(repo), "check-ignore", "-q", "--no-index", probe],
            env={"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".config"), "PATH": "/usr/bin:/bin"},
            check=False,
        )
        assert done.returncode in (0, 1), rel
        assert rules.ignored(rel, is_dir) == (done.returncode == 0), rel
