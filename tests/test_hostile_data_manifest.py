"""`python -m capjax.data.manifest` against bad input: files that are not manifests, among others
(tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

import gzip

from hostile.harness import FIFO, case, runner

MANIFEST = "capjax.data.manifest"

HEADER = b"split\tkey\turl\tsha256\n"
GOOD = gzip.compress(HEADER + b"train\t000000000\thttp://example.org/0.jpg\t" + b"ab" * 32 + b"\n", mtime=0)
NOT_MANIFESTS = {  # name -> (bytes, what the error line says)
    "random-bytes": (b"\x1f\x8b" + bytes(range(256)) * 2, "not a whole gzip file"),
    "plain-tsv": (b"split\tkey\turl\tsha256\n", "not a whole gzip file"),
    "empty-gzip": (gzip.compress(b""), "it is empty"),
    "other-header": (gzip.compress(b"caption\turl\n"), "its first line is not `split key url sha256`"),
    "three-fields": (gzip.compress(HEADER + b"train\t0\thttp://example.org/0.jpg\n"), "line 2 is not"),
    "short-sha256": (gzip.compress(HEADER + b"train\t0\thttp://example.org/0.jpg\tabc\n"), "line 2 is not"),
    "no-key-no-url": (gzip.compress(HEADER + b"train\t\t\t" + b"ab" * 32 + b"\n"), "line 2 is not"),
    "latin1": (gzip.compress(HEADER + b"train\t0\thttp://example.org/caf\xe9.jpg\t" + b"ab" * 32 + b"\n"),
               "not a whole gzip file of UTF-8 text"),
    "cut-short": (GOOD[:-9], "not a whole gzip file"),
    "line-over-64k": (gzip.compress(HEADER + b"train\t0\t" + b"x" * 70_000 + b"\n"),
                      "line 2 is over 65,536 characters"),
}

CASES = [
    case(MANIFEST, "no-command", match="no command"),
    case(MANIFEST, "unknown-command", "diff", "{t}/a.tsv.gz", "{t}/b.tsv.gz", match="unknown command 'diff'"),
    case(MANIFEST, "compare-one", "compare", "{t}/a.tsv.gz", files={"a.tsv.gz": GOOD},
         match="compare takes two manifests, not 1"),
    case(MANIFEST, "compare-missing", "compare", "{t}/a.tsv.gz", "{t}/nowhere.tsv.gz", files={"a.tsv.gz": GOOD},
         match="{t}/nowhere.tsv.gz does not exist"),
    case(MANIFEST, "compare-a-fifo", "compare", "{t}/a.tsv.gz", "{t}/pipe.tsv.gz",
         files={"a.tsv.gz": GOOD, "pipe.tsv.gz": FIFO}, match="is a FIFO"),
    case(MANIFEST, "compare-a-folder-without-one", "compare", "{t}/a.tsv.gz", "{t}/folder",
         files={"a.tsv.gz": GOOD}, match="{t}/folder/manifest.tsv.gz does not exist"),
    *[case(MANIFEST, f"not-a-manifest-{name}", "compare", "{t}/a.tsv.gz", "{t}/b.tsv.gz",
           files={"a.tsv.gz": GOOD, "b.tsv.gz": data}, match=f"{{t}}/b.tsv.gz is not a manifest: {what}")
      for name, (data, what) in NOT_MANIFESTS.items()],
    case(MANIFEST, "common-is-a", "compare", "{t}/a.tsv.gz", "{t}/b.tsv.gz", "--common={t}/a.tsv.gz",
         files={"a.tsv.gz": GOOD, "b.tsv.gz": GOOD}, match="would overwrite A="),
    case(MANIFEST, "common-in-a-missing-folder", "compare", "{t}/a.tsv.gz", "{t}/b.tsv.gz",
         "--common={t}/nowhere/common.tsv", files={"a.tsv.gz": GOOD, "b.tsv.gz": GOOD}, match="does not exist"),
    case(MANIFEST, "compare-with-dataset", "compare", "{t}/a.tsv.gz", "{t}/b.tsv.gz", "--dataset=cc3m",
         files={"a.tsv.gz": GOOD, "b.tsv.gz": GOOD}, match="--dataset is for `write`"),
    case(MANIFEST, "write-without-dataset", "write", match="missing --dataset"),
    case(MANIFEST, "write-with-arguments", "write", "{t}/a.tsv.gz", "--dataset=cc3m", match="write takes"),
    case(MANIFEST, "write-not-built", "write", "--dataset=cc3m", "--data_dir={t}/data",
         match="is not built in {t}/data"),
    case(MANIFEST, "write-no-image-fields", "write", "--dataset=synthetic_scenes/tiny", "--data_dir={d}",
         match="has no image, url and key fields"),
    case(MANIFEST, "unknown-flag", "compare", "{t}/a.tsv.gz", "{t}/b.tsv.gz", "--bogus=1", match="bogus"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
