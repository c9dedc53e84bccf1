"""The `tune` command: composes the command groups; bad input is one line and exit code 2."""
from __future__ import annotations

import logging
import os
import sys

import typer

from tuner.cli import campaign, info, lower, packs, regress
from tuner.cli.common import CliError, err_console

app = typer.Typer(
    help="Autotune Triton kernel templates, store every trial, export packs a runtime loads.",
    no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
for group in (info.app, campaign.app, packs.app, lower.app, regress.app):
    app.registered_commands.extend(group.registered_commands)


_NO_KERNEL_RUNS = {"lower", "export", "verify-pack", "list", "show", "regressions", "dashboard"}


def _register_kernels() -> None:
    from tuner import registry
    from tuner.cli import tune

    have = {c.name for c in app.registered_commands}
    for k in registry.kernels().values():
        if k.cli_name not in have:
            tune.register(app, k)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the console script."""
    from tuner.registry import UnknownKernel
    from tuner.runtime import PackError
    from tuner.store import StoreError

    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    args = sys.argv[1:] if argv is None else argv
    if not (args and (args[0] in _NO_KERNEL_RUNS or "--preflight" in args)):
        # Without a GPU, kernels run through Triton's interpreter; it must be switched on
        # before any template module is imported. Commands that run no kernel leave it off,
        # so `lower` compiles for a real target and pack checks judge GPU configs as such.
        import torch

        if not torch.cuda.is_available():
            os.environ["TRITON_INTERPRET"] = "1"
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    _register_kernels()
    try:
        rc = app(args=args, standalone_mode=False, prog_name="tune")
    except (CliError, UnknownKernel, StoreError, PackError) as e:
        err_console.print(f"error: {e}", highlight=False, soft_wrap=True, markup=False)
        return 2
    except (typer.Exit, typer.Abort, Exception) as e:
        # click (vendored or not, depending on the typer release) signals usage errors with
        # an exception carrying exit_code 2 and format_message(): one line, no traceback.
        code = getattr(e, "exit_code", None)
        if code == 2 and hasattr(e, "format_message"):
            if e.format_message():  # (none after the help that `tune` alone prints)
                err_console.print(f"error: {e.format_message()}", highlight=False, soft_wrap=True, markup=False)
            return 2
        if isinstance(e, typer.Abort) or type(e).__name__ == "Abort":
            err_console.print("aborted: finished trials are in the database; run again to resume")
            return 130
        if code is not None and type(e).__name__ == "Exit":
            return int(code)
        raise
    if isinstance(rc, int):
        return rc
    return 0


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
