"""The ``coderun-rpc`` console script: runs the daemon found as the client finds it.

It replaces itself with the binary (``os.execv``), so arguments, stdio, signals and the exit code
are the daemon's own. When no daemon is found it prints why and exits 127, as a shell does.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn, Optional, Sequence

from ._locate import find_daemon
from .errors import DaemonNotFound


def main(argv: Optional[Sequence[str]] = None) -> NoReturn:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        binary = find_daemon()
    except DaemonNotFound as e:
        print(f"coderun-rpc: {e}", file=sys.stderr)
        sys.exit(127)
    os.execv(binary, [binary, *args])


if __name__ == "__main__":
    main()
