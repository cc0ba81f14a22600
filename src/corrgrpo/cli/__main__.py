from corrgrpo.cli import main

raise SystemExit(main())
