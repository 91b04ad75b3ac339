"""Training-ready output: a run's documents as token files.

Here: the tokenize settings (``settings``), loading and checking a tokenizer
(``tokenizer``), and the token file formats (``files``: Megatron's indexed dataset,
datatrove's ``.ds``), each with a writer, a reader and the merge of many files into a few.
The phases that run them over a checkpoint's files are ``run.phases``'.

May import: core, helpers (the allocator its encoder runs on). Never Ray.
"""
