import sys

from webhook.certs.cli import main

sys.exit(main())
