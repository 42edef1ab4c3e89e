"""The GUI: generation speed with the window and its live graphs running."""
