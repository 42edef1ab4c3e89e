"""Entry script of the frozen DynaDraft bundle: the same `app.cli:main` as the installed `dynadraft` command."""

import multiprocessing
import sys

if __name__ == "__main__":
    multiprocessing.freeze_support()  # no-op unless something starts a child process (uvicorn, pyqtgraph)
    from app.cli import main

    sys.exit(main())
