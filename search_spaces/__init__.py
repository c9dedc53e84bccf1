"""Search spaces: one module per kernel family, same stem as its kernel template."""
