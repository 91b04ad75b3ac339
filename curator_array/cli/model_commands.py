"""``curator-array train-classifier``: a quality classifier trained from labelled texts,
ready for ``--quality-model``."""

from __future__ import annotations

from pathlib import Path

import click

from .group import cli


@cli.command("train-classifier", epilog="""\b
Examples:
  curator-array train-classifier --positive hq/*.jsonl --negative cc/*.parquet -o hq.bin
  curator-array run ... --quality-model hq=hq.bin --keep-top-fraction hq=0.1""")
@click.option("--positive", "positive", multiple=True, required=True, type=click.Path(exists=True, dir_okay=False),
              help="JSONL or Parquet files (a `text` field) of the quality class; repeatable.")
@click.option("--negative", "negative", multiple=True, required=True, type=click.Path(exists=True, dir_okay=False),
              help="Files of the other class; repeatable.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="The model file to write (.bin; .ftz with --quantize).")
@click.option("--label", default="__label__hq", show_default=True, help="The label of the quality class.")
@click.option("--epoch", default=5, show_default=True, type=click.IntRange(min=1))
@click.option("--lr", default=0.1, show_default=True, type=click.FloatRange(min=0, min_open=True))
@click.option("--dim", default=100, show_default=True, type=click.IntRange(min=1))
@click.option("--word-ngrams", default=2, show_default=True, type=click.IntRange(min=1),
              help="Word n-grams (DCLM's bigram model: 2).")
@click.option("--bucket", default=2_000_000, show_default=True, type=click.IntRange(min=1),
              help="Hash buckets of the n-grams (the model's size grows with them: 2M is ~800 MB).")
@click.option("--quantize", is_flag=True, help="Write a quantized model (.ftz, far smaller).")
def train_classifier(positive, negative, output, label, epoch, lr, dim, word_ngrams, bucket, quantize):
    """Train a fastText quality classifier (DCLM's defaults) on balanced classes, 5% of each
    held out: prints the held-out precision and recall."""
    from ..classify.training import Hyperparameters, train

    settings = Hyperparameters(lr=lr, dim=dim, epoch=epoch, wordNgrams=word_ngrams, bucket=bucket)
    evaluation = train(list(positive), list(negative), output, label=label, settings=settings, quantize=quantize,
                       say=lambda line: click.echo(line, err=True))
    click.echo(f"wrote {output} ({output.stat().st_size:,} bytes); held out {evaluation.documents} documents: "
               f"precision {evaluation.precision:.3f}, recall {evaluation.recall:.3f}")
    advice = evaluation.advice(settings)
    if advice:
        click.echo(advice, err=True)
