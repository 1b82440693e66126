import sys

try:
    from specstate.cli import main
except KeyboardInterrupt:  # Ctrl-C while specstate itself is being imported: its one line, not a traceback
    print("specstate: interrupted by SIGINT; stopped while starting", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
