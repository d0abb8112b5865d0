"""``opgate serve ARGS`` with a cProfile of its main thread between two signals.

``python benchmarks/gateway_profiled.py OUTPUT -- ARGS...`` runs ``opgate`` with ``ARGS``;
it writes its process id to ``OUTPUT.pid``; ``SIGUSR1`` starts profiling, ``SIGUSR2``
stops it and writes the stats to ``OUTPUT`` (``pstats`` format), so ``bench_gateway.py``
profiles calls only, never the start-up.
"""

from __future__ import annotations

import cProfile
import os
import signal
import sys
from types import FrameType

from opgate.cli import main


def run(output: str, arguments: list[str]) -> None:
    profiler = cProfile.Profile()

    def start(signum: int, frame: FrameType | None) -> None:
        profiler.enable()

    def stop(signum: int, frame: FrameType | None) -> None:
        profiler.disable()
        profiler.dump_stats(output)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    with open(output + ".pid", "w", encoding="ascii") as pid:
        pid.write(str(os.getpid()))
    sys.exit(main(arguments))


if __name__ == "__main__":
    separator = sys.argv.index("--")
    run(sys.argv[1], sys.argv[separator + 1 :])
