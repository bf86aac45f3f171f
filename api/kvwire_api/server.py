"""Start the service with a production ASGI server (uvicorn, one worker process): ``kvwire-api`` and
``kvwire serve`` (which forwards its arguments here).

Binding to a non-loopback address needs ``KVWIRE_API_TOKEN`` (then every endpoint but ``/health`` asks for
``Authorization: Bearer <token>``); without it the server refuses to start. With ``--dask ADDR`` (or
``KVWIRE_DASK_SCHEDULER``) the jobs run on that Dask cluster: the server connects to its scheduler before it
binds, and a scheduler it cannot reach is an error naming the address (exit status 1, no traceback).
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import click

from kvwire_api.cluster import Cluster, ClusterError
from kvwire_api.config import Settings, SettingsError, default_data_dir


def serve(settings: Settings, cluster: Cluster | None = None) -> None:
    """Run uvicorn on ``settings.host:settings.port`` until interrupted (SIGINT/SIGTERM stop it gracefully:
    running jobs are asked to stop after their in-flight points and resume at the next start). ``cluster``:
    the Dask cluster of ``settings.dask_scheduler``, already connected (the service closes it when it stops)."""
    import uvicorn

    from kvwire_api.app import create_app

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    config = uvicorn.Config(
        create_app(settings, cluster),
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
@click.option(
    "--docs",
    "docs_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="A built documentation site (mkdocs build's site/) to serve under /docs (default: $KVWIRE_DOCS_DIR, "
    "else site/ in the current directory when it holds an index.html).",
)
@click.option("--no-docs", is_flag=True, help="Serve no documentation, whatever --docs' default would find.")
@click.option(
    "--dask",
    "dask_scheduler",
    metavar="ADDRESS",
    default=None,
    help="Run the jobs (sweeps, capacity searches, splits, plans) on the Dask cluster of this scheduler, e.g. "
    "tcp://scheduler:8786 (default: $KVWIRE_DASK_SCHEDULER, else the service's own threads); single "
    "simulations stay in the service.",
)
def main(
    host: str, port: int, data_dir: Path | None, docs_dir: Path | None, no_docs: bool, dask_scheduler: str | None
) -> None:
    """Serve kvwire over HTTP: simulations, sweep and capacity jobs, the hand-off calculator, the web page
    (and the documentation site under /docs when there is one).

    The OpenAPI document is at /schema; limits and other settings come from KVWIRE_API_* environment
    variables (the docs' Reference → HTTP API page, docs/reference/http-api.md).
    """
    if no_docs and docs_dir is not None:
        raise click.UsageError("--docs and --no-docs contradict each other; give one")
    try:
        settings = Settings.from_env(
            host=host,
            port=port,
            data_dir=data_dir,
            docs_dir=docs_dir,
            no_docs=no_docs,
            dask_scheduler=dask_scheduler,
        )
    except SettingsError as e:
        raise click.ClickException(str(e)) from None
    cluster = None
    if settings.dask_scheduler is not None:
        try:
            cluster = Cluster.connect(settings.dask_scheduler, settings.dask_timeout_s)
        except ClusterError as e:
            raise click.ClickException(str(e)) from None
    docs = f", docs from {settings.docs_dir} at /docs/" if settings.docs_dir is not None else ""
    jobs = f", jobs on the Dask cluster at {settings.dask_scheduler}" if cluster is not None else ""
    click.echo(f"kvwire-api: serving on http://{host}:{port} (data in {settings.data_dir}{docs}{jobs})", err=True)
    serve(settings, cluster)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
