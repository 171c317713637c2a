"""``ptd --show-completion [SHELL]`` / ``--install-completion [SHELL]`` (ptd_cli/completion.py):
a named shell is the one written for, whichever shell runs ptd; without a name, the shell that
runs it; where none can be found (no shell among the parents, or one without a script), one
``ptd: error:`` line. The scripts then complete through ``_PTD_COMPLETE``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import shellingham

from ptd_cli import completion
from ptd_cli.main import run

ENV = {**os.environ, "PYTHONPATH": os.getcwd(), "COLUMNS": "100", "NO_COLOR": "1"}

#: a line each shell's script has, and no other's
MARKERS = {
    "bash": "complete -o default -F _ptd_completion ptd",
    "zsh": "#compdef ptd",
    "fish": "complete --command ptd",
    "powershell": "Register-ArgumentCompleter",
    "pwsh": "Register-ArgumentCompleter",
}


def ptd(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptd", *args],
        capture_output=True,
        text=True,
        env=env or ENV,
        check=False,
        timeout=120,
    )


def in_process(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_:
        run(args)
    out, err = capsys.readouterr()
    return int(exit_.value.code or 0), out, err


@pytest.mark.parametrize("shell", completion.SHELLS)
def test_each_named_shell_gets_its_script(shell: str) -> None:
    r = ptd("--show-completion", shell)
    assert r.returncode == 0, r.stderr
    assert MARKERS[shell] in r.stdout
    assert "_PTD_COMPLETE" in r.stdout
    others = {m for s, m in MARKERS.items() if m != MARKERS[shell]}
    assert not any(m in r.stdout for m in others)


def test_the_named_shell_wins_over_the_running_one() -> None:
    # run from bash: Typer's own option printed bash's script here, whatever was named
    r = subprocess.run(
        ["bash", "-c", f'"{sys.executable}" -m ptd --show-completion zsh'],
        capture_output=True,
        text=True,
        env=ENV,
        check=False,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("#compdef ptd")
    r = ptd("--show-completion=fish")
    assert r.returncode == 0, r.stderr
    assert MARKERS["fish"] in r.stdout


def test_without_a_name_the_running_shell(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(shellingham, "detect_shell", lambda: ("zsh", "/bin/zsh"))
    code, out, err = in_process(["--show-completion"], capsys)
    assert (code, err) == (0, "")
    assert out.startswith("#compdef ptd")


@pytest.mark.parametrize(
    ("detected", "needle"),
    [
        (None, "cannot tell which shell runs ptd (none among its parent processes)"),
        (("sh", "/bin/sh"), "ptd runs in sh, which has no completion script"),
    ],
    ids=["no-shell", "sh"],
)
def test_an_undetectable_shell_is_one_line_asking_for_a_name(
    detected: tuple[str, str] | None,
    needle: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A Dockerfile's RUN (sh), or a process manager starting ptd with no shell above it:
    Typer's option said 'Shell  not supported.' there."""

    def detect() -> tuple[str, str]:
        if detected is None:
            raise shellingham.ShellDetectionFailure()
        return detected

    monkeypatch.setattr(shellingham, "detect_shell", detect)
    for flag in completion.FLAGS:
        code, out, err = in_process([flag], capsys)
        assert code == 2
        assert out == ""
        lines = err.strip().splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith("ptd: error: ")
        assert needle in lines[0]
        assert "`ptd --show-completion bash`" in lines[0]


def test_an_unknown_shell_name_is_refused() -> None:
    r = ptd("--show-completion", "tcsh")
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.strip() == (
        "ptd: error: no completion script for the shell 'tcsh': name one of bash, zsh, fish, "
        "powershell, pwsh, as in `ptd --show-completion bash`"
    )


def test_only_the_global_options_are_read() -> None:
    assert completion.completion_request(["inspect", "--show-completion"]) is None
    assert completion.completion_request(["--", "--show-completion"]) is None
    assert completion.completion_request(["--debug", "--show-completion", "zsh"]) == (
        "--show-completion",
        "zsh",
    )
    assert completion.completion_request(["--show-completion", "--debug"]) == (
        "--show-completion",
        None,
    )
    # after the command it is the command's business: click says it has no such option
    r = ptd("inspect", "x.h5", "--show-completion", "bash")
    assert r.returncode == 2
    assert "No such option: --show-completion" in r.stderr


def test_install_writes_into_the_home_directory(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    r = ptd("--install-completion", "bash", env={**ENV, "HOME": str(home)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == (
        f"bash completion installed in {home / '.bash_completions' / 'ptd.sh'}"
    )
    script = (home / ".bash_completions" / "ptd.sh").read_text()
    assert MARKERS["bash"] in script
    assert "ptd.sh" in (home / ".bashrc").read_text()


def test_install_that_cannot_write_is_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.write_text("a file where the home directory should be")
    r = ptd("--install-completion", "zsh", env={**ENV, "HOME": str(home)})
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("ptd: error: cannot install the completion script: ")
    assert "Traceback" not in r.stderr


def test_the_scripts_complete_through_the_environment_variable() -> None:
    env = {**ENV, "_PTD_COMPLETE": "complete_bash", "COMP_WORDS": "ptd ins", "COMP_CWORD": "1"}
    r = ptd(env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["inspect"]


def test_help_says_a_shell_can_be_named() -> None:
    r = ptd("-h", env={**ENV, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    lines = {ln.split("│")[1].split()[0]: ln for ln in r.stdout.splitlines() if "completion" in ln}
    assert "[SHELL] Print the completion script for SHELL (bash, zsh" in lines["--show-completion"]
    assert "[SHELL] Install completion for SHELL" in lines["--install-completion"]
