"""The built-in stages' defaults and choices, importable without pyarrow.

Each value is defined here once: the stages take them as their defaults, and the run's
option table (``run.option_table``) shows them in ``--help`` before pyarrow is imported.
"""

import sys
from pathlib import Path

from ..core import layout
from ..storage.places import STORE_ATTEMPTS

# A per-node Ray resource on clusters curator-array starts; each download worker takes one.
DOWNLOAD_SLOT = "curator_download_slot"
DOWNLOAD_WORKERS_PER_NODE = 2
DOWNLOAD_RETRIES = STORE_ATTEMPTS - 1  # further tries of a URL; an object store's reads and writes get as many
DOWNLOAD_CONNECT_TIMEOUT_S = 10.0
DOWNLOAD_READ_TIMEOUT_S = 60.0

# What a reader does with a record it cannot decode: fail its task, or skip and count it.
MALFORMED_POLICIES = ("fail", "skip")
EXTRACTORS = ("resiliparse", "trafilatura")
WARC_RECORDS_PER_BATCH = 256
OUTPUT_FILE_SIZE = 1 << 30  # a streamed task's files roll over here: a size parallel file systems handle well
TEXT_FIELD = "text"
TOKEN_COUNT_FIELD = "token_count"  # each document's tokens, with --tokenize

# Where `make install` and the image build install FineWeb's URL lists (--url-lists names another place).
URL_LISTS_DIR = Path(sys.prefix) / "share" / "curator-array" / "url-lists"

# Where Common Crawl's crawl-data/ is served (--crawl-base-url changes it).
COMMON_CRAWL_BASE_URL = "https://data.commoncrawl.org/"

# FineWeb's language rule: keep these languages when one scores above this (fastText lid.176).
FINEWEB_LANGUAGES = ("en",)
FINEWEB_MIN_SCORE = 0.65
DCLM_PIPELINE = "dclm"
DCLM_QUALITY_THRESHOLD = 0.018112  # DCLM-Baseline's cut on its fastText classifier (OH-2.5 + ELI5)
# The threshold a built-in pipeline gives each --quality-model left without --quality-threshold.
PIPELINE_QUALITY_THRESHOLDS = {DCLM_PIPELINE: DCLM_QUALITY_THRESHOLD}

# Where the documents a filter dropped go, under the output dir (--keep-removed).
REMOVED_DIR = layout.REMOVED_DIR
PIPELINE_REMOVED_DIR = layout.PIPELINE_REMOVED_DIR
