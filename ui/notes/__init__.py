"""Course notes in one command: ``python -m ui.notes LESSON|all --out DIR`` runs each lesson page headless on each
preset (print theme), exports every chart it draws (SVG, PNG at 3x, interactive HTML) and writes a notes page per
lesson (Markdown and self-contained HTML) with the page's own captions, sentences and numbers. ``export`` is the
entry point for code (the tests); ``__main__`` the command line."""
