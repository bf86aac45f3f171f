"""Start the service with a production ASGI server (uvicorn, one worker process): ``kvwire-api`` and
``kvwire serve`` (which forwards its arguments here).

Binding to a non-loopback address needs ``KVWIRE_API_TOKEN`` (then every endpoint but ``/health`` asks for
``Authorization: Bearer <token>``); without it the server refuses to start.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from kvwire_api.config import Settings, SettingsError, default_data_dir


def serve(settings: Settings) -> None:
    """Run uvicorn on ``settings.host:settings.port`` until interrupted (SIGINT/SIGTERM stop it gracefully:
    running jobs are asked to stop after their in-flight points and resume at the next start)."""
    import uvicorn

    from kvwire_api.app import create_app

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    config = uvicorn.Config(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        workers=1,
        log_level="info",
        timeout_graceful_shutdown=15,
        server_header=False,
    )
    uvicorn.Server(config).run()


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (non-loopback needs a token).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="TCP port.")
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help=f"Where runs, jobs and traces are kept (default: $KVWIRE_DATA_DIR or {default_data_dir()}).",
)
def main(host: str, port: int, data_dir: Path | None) -> None:
    """Serve kvwire over HTTP: simulations, sweep and capacity jobs, the hand-off calculator.

    The OpenAPI document is at /schema; limits and other settings come from KVWIRE_API_* environment
    variables (the docs' Reference → HTTP API page, docs/reference/http-api.md).
    """
    try:
        settings = Settings.from_env(host=host, port=port, data_dir=data_dir)
    except SettingsError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"kvwire-api: serving on http://{host}:{port} (data in {settings.data_dir})", err=True)
    serve(settings)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
