"""python -m ckptfs ARGS and the wheel's ckptfs command: the ckptfs program
with ARGS (it replaces this process)."""
from __future__ import annotations

import os
import sys

from ckptfs._binary import binary


def main() -> None:
    try:
        program = binary()
    except FileNotFoundError as e:
        sys.exit("ckptfs: %s" % e)
    os.execv(program, [program] + sys.argv[1:])


if __name__ == "__main__":
    main()
