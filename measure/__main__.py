import sys

from measure.cli import main

if __name__ == "__main__":  # load workers are spawned processes: importing this module must not run a second CLI
    sys.exit(main())
