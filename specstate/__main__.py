import sys

from specstate.cli import main

sys.exit(main())
