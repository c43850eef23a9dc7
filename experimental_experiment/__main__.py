from ._command_lines import main

raise SystemExit(main())
