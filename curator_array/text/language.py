"""A document's language: the columns that name it, and the language a document without one
is taken to be. Every stage and phase that reads a row's language uses these names."""

LANGUAGE_FIELD = "language"
LANGUAGE_SCORE_FIELD = "language_score"
DEFAULT_LANGUAGE = "en"
