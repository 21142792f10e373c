"""One module per `admitter` subcommand; each registers its parser and stays a thin edge."""
