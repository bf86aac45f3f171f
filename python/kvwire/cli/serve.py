"""``kvwire serve``: the HTTP service (the ``kvwire-api`` package), with its own options passed through."""

from __future__ import annotations

import click


@click.command(
    "serve",
    context_settings={"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []},
    add_help_option=False,
)
@click.pass_context
def serve_cmd(ctx: click.Context) -> None:
    """Serve kvwire over HTTP: kvwire serve [--host 127.0.0.1] [--port 8000] [--data-dir DIR] [--docs DIR]
    [--dask tcp://scheduler:8786].

    Needs the service package (pip install ./api); `kvwire serve --help` lists its options.
    """
    try:
        from kvwire_api.server import main as serve_main
    except ModuleNotFoundError as e:
        if e.name and e.name.split(".")[0] == "kvwire_api":
            raise click.ClickException(
                "`kvwire serve` needs the service package kvwire-api, which is not installed: "
                "run `pip install ./api` from the kvwire repository"
            ) from None
        raise click.ClickException(f"kvwire-api is installed but cannot start: missing module {e.name!r}") from None
    serve_main.main(args=ctx.args, prog_name="kvwire serve")


__all__ = ["serve_cmd"]
