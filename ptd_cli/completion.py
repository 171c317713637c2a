"""``ptd --show-completion [SHELL]`` and ``ptd --install-completion [SHELL]``.

Typer adds both options, but where shellingham is installed (Typer's default) they take no
shell name: they find the shell by walking up the process tree, so ``ptd --show-completion zsh``
typed in bash prints bash's script, and where no shell runs ptd (a Dockerfile's ``RUN``, a
CI step or a process manager that starts it directly, ``sh -c``) they fail with "Shell  not
supported." This module reads the request before Typer does: a named shell is used as
given; without one, the shell that runs ptd; when that cannot be found, or is a shell Typer
writes no script for, one ``ptd: error:`` line says so and asks for a name (exit 2).

The scripts themselves, and where ``--install-completion`` puts them, are Typer's
(``typer.completion``): the same ``_PTD_COMPLETE`` protocol that its options set up.

>>> completion_request(["--show-completion", "zsh"])
('--show-completion', 'zsh')
>>> completion_request(["--install-completion=fish"])
('--install-completion', 'fish')
>>> completion_request(["--show-completion"])
('--show-completion', None)
>>> completion_request(["inspect", "x.h5"]) is None
True
"""

from __future__ import annotations

from collections.abc import Sequence

import shellingham
import typer
import typer.completion

__all__ = ["COMPLETE_VAR", "FLAGS", "HELP", "SHELLS", "completion_request", "run_completion"]

#: the shells Typer writes a completion script for
SHELLS: tuple[str, ...] = tuple(s.value for s in typer.completion.Shells)
#: the two global options this module answers
FLAGS = ("--show-completion", "--install-completion")
#: the environment variable the scripts set to ask ptd for completions (Typer's protocol)
COMPLETE_VAR = "_PTD_COMPLETE"

_EXAMPLE = f"`ptd --show-completion {SHELLS[0]}`"

#: ``ptd -h``'s lines for the two options (Typer's speak of the current shell only)
HELP = {
    "--show-completion": (
        f"[SHELL] Print the completion script for SHELL ({', '.join(SHELLS)}; default: the "
        "shell running ptd)."
    ),
    "--install-completion": (
        "[SHELL] Install completion for SHELL (default: the shell running ptd)."
    ),
}


class CompletionError(Exception):
    """A completion request that cannot be answered (the message says why)."""


def completion_request(argv: Sequence[str]) -> tuple[str, str | None] | None:
    """``(flag, shell or None)`` when ``argv`` asks for a completion script, else None.

    Only the global options before the command count (both flags are global, and the
    command's own arguments are its own); ``SHELL`` is the next word or ``=SHELL``."""
    for i, word in enumerate(argv):
        if word == "--":
            return None
        if not word.startswith("-"):
            return None  # the command: what follows is its own
        flag, eq, value = word.partition("=")
        if flag in FLAGS:
            if eq:
                return flag, value
            following = argv[i + 1] if i + 1 < len(argv) else None
            if following is not None and not following.startswith("-"):
                return flag, following
            return flag, None
    return None


def _shell(named: str | None) -> str:
    """The shell to write for: ``named``, else the one running ptd."""
    if named is not None:
        if named.lower() not in SHELLS:
            raise CompletionError(
                f"no completion script for the shell {named!r}: name one of "
                f"{', '.join(SHELLS)}, as in {_EXAMPLE}"
            )
        return named.lower()
    try:
        found, _path = shellingham.detect_shell()
    except shellingham.ShellDetectionFailure:
        raise CompletionError(
            "cannot tell which shell runs ptd (none among its parent processes): name it, "
            f"as in {_EXAMPLE}; one of {', '.join(SHELLS)}"
        ) from None
    found = str(found).lower()
    if found not in SHELLS:
        raise CompletionError(
            f"ptd runs in {found}, which has no completion script: name one of "
            f"{', '.join(SHELLS)}, as in {_EXAMPLE}"
        )
    return found


def run_completion(flag: str, named: str | None) -> None:
    """Print the completion script (``--show-completion``) or install it
    (``--install-completion``) for ``named`` or the shell running ptd. Raises
    CompletionError when there is no such shell, OSError when the install cannot write."""
    shell = _shell(named)
    if flag == "--show-completion":
        typer.echo(
            typer.completion.get_completion_script(
                prog_name="ptd", complete_var=COMPLETE_VAR, shell=shell
            )
        )
        return
    shell, path = typer.completion.install(shell=shell, prog_name="ptd", complete_var=COMPLETE_VAR)
    typer.echo(f"{shell} completion installed in {path}")
    typer.echo("Completion will take effect once you restart the terminal.")
