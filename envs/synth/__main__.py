"""``python -m envs.synth``: see :mod:`envs.synth.cli`."""

import sys

from envs.synth.cli import main

if __name__ == "__main__":
    sys.exit(main())
