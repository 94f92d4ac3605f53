"""What every testbed service process shares: run until SIGTERM/SIGINT, then stop cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Coroutine
from typing import Any

LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"


async def wait_for_stop_signal() -> None:
    """Return when the process is asked to stop (the lifecycle sends SIGTERM; a terminal sends SIGINT)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()


def run_service(main: Coroutine[Any, Any, int]) -> int:
    """Configure logging and run a service's main coroutine; Ctrl-C before the handlers are set is a clean exit."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(main)
    return 0
