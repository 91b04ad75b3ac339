"""Helper processes that do a run's heaviest library work, and how they start: the allocator
they run on (``allocator``), and work spread over the CPUs an element was given, in order
(``parallel``). A layer of its own because it spawns processes and sets their
environment, which the pure core must not, and both the stages and the tokenizer use it.

May import: core. Never Ray or pyarrow.
"""
