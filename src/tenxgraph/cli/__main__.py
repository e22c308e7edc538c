"""`python -m tenxgraph.cli`: the same as the `tenxgraph` command."""

from tenxgraph.cli import main

raise SystemExit(main())
