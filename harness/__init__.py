"""The controller: platforms, interpreter, store, analysis pipeline, reports and the CLI."""
