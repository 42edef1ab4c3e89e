"""`python -m app` runs the dynadraft command line."""

from app.cli import main

raise SystemExit(main())
