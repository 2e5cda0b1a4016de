"""`python -m capjax.metrics` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import FIFO, NULL_DEVICE, case, runner
from hostile.inputs import DEEP_JSON, PREDS, REFS, as_json

METRICS = "capjax.metrics"


def _metrics(name: str, refs: object = REFS, preds: object = PREDS, *flags: str, match: str = "",
             raw_refs: bytes | None = None, raw_preds: bytes | None = None):
  files = {"r.json": raw_refs if raw_refs is not None else as_json(refs),
           "p.json": raw_preds if raw_preds is not None else as_json(preds)}
  return case(METRICS, name, "{t}/r.json", "{t}/p.json", "--notokenize", *flags, files=files, match=match)


CASES = [
    case(METRICS, "no-files", match="two files"),
    case(METRICS, "one-file", "{t}/refs.json", match="two files"),
    case(METRICS, "three-files", "{t}/refs.json", "{t}/preds.json", "{t}/preds.json", match="two files"),
    case(METRICS, "refs-missing", "{t}/missing.json", "{t}/preds.json", match="missing.json"),
    case(METRICS, "preds-missing", "{t}/refs.json", "{t}/missing.json", match="missing.json"),
    case(METRICS, "refs-is-a-folder", "{t}/folder", "{t}/preds.json", match="folder"),
    case(METRICS, "refs-chmod", "{t}/refs.json", "{t}/preds.json", chmod={"refs.json": 0o200}),
    case(METRICS, "refs-is-a-fifo", "{t}/pipe.json", "{t}/preds.json", files={"pipe.json": FIFO},
         match="pipe.json is a FIFO"),
    case(METRICS, "preds-is-a-device", "{t}/refs.json", "{t}/null.json", files={"null.json": NULL_DEVICE},
         match="null.json is a character device"),
    case(METRICS, "lm-is-a-fifo", "{t}/refs.json", "{t}/preds.json", "--style=romantic", "--lm={t}/pipe.json",
         files={"pipe.json": FIFO}, match="pipe.json is a FIFO"),
    case(METRICS, "refs-empty-file", "{t}/empty.txt", "{t}/preds.json", match="not JSON"),
    case(METRICS, "refs-random-bytes", "{t}/random.bin", "{t}/preds.json", match="random.bin"),
    case(METRICS, "preds-tsv", "{t}/refs.json", "{t}/captions.tsv", match="not JSON"),
    _metrics("refs-truncated", raw_refs=as_json(REFS)[:30], match="not JSON"),
    _metrics("refs-not-utf8", raw_refs=b'{"annotations": [{"image_id": 1, "caption": "caf\xe9"}]}', match="UTF-8"),
    _metrics("refs-a-list", refs=PREDS, match="annotations"),
    _metrics("refs-annotations-not-a-list", refs={"annotations": {"1": "a dog"}}, match="annotations"),
    _metrics("refs-images-not-a-list", refs={"images": 3, "annotations": REFS["annotations"]}, match="images"),
    _metrics("refs-image-without-id", refs={"images": [{"name": 1}], "annotations": []}, match="image 0"),
    _metrics("refs-annotation-without-caption", refs={"annotations": [{"image_id": 1}]}, match="annotation 0"),
    _metrics("refs-caption-not-text", refs={"annotations": [{"image_id": 1, "caption": ["a", "dog"]}]},
             match="annotation 0"),
    _metrics("refs-caption-empty", refs={"annotations": [{"image_id": 1, "caption": " "}]}, match="empty caption"),
    _metrics("refs-image-id-float", refs={"annotations": [{"image_id": 1.5, "caption": "a"}]}, match="1.5"),
    _metrics("refs-image-id-boolean", refs={"annotations": [{"image_id": True, "caption": "a"}]}, match="true"),
    _metrics("refs-no-images", refs={"images": [], "annotations": []}, preds=[]),
    _metrics("preds-an-object", preds={"1": "a dog"}, match="JSON object"),
    _metrics("preds-entry-without-image-id", preds=[{"caption": "a dog"}], match="result 0"),
    _metrics("preds-caption-null", preds=[{"image_id": 1, "caption": None}, PREDS[1]], match="null"),
    _metrics("preds-two-for-one-image", preds=[*PREDS, PREDS[0]], match="more than one"),
    _metrics("preds-missing-an-image", preds=PREDS[:1], match="no prediction"),
    _metrics("preds-extra-image", preds=[*PREDS, {"image_id": 3, "caption": "a bird"}], match="no references"),
    _metrics("ids-numbers-and-strings", preds=[{"image_id": "1", "caption": "a"}, {"image_id": "2", "caption": "b"}],
             match="the same way"),
    _metrics("metric-unknown", REFS, PREDS, "--metrics=Bleu,BLUE", match="BLUE"),
    _metrics("metrics-empty", REFS, PREDS, "--metrics=", match="metrics"),
    case(METRICS, "unknown-flag", "{t}/refs.json", "{t}/preds.json", "--bogus=1", match="bogus"),
    _metrics("style-unknown", REFS, PREDS, "--style=sarcastic", "--lm={t}/lm.json", match="unknown style"),
    _metrics("style-without-lm", REFS, PREDS, "--style=romantic", match="--lm"),
    _metrics("lm-without-style", REFS, PREDS, "--lm={t}/lm.json", match="--style"),
    _metrics("style-with-metrics", REFS, PREDS, "--style=romantic", "--lm={t}/lm.json", "--metrics=CIDEr",
             match="--metrics"),
    _metrics("style-model-not-a-style-model", REFS, PREDS, "--style=romantic", "--lm={t}/lm.json", "--style_model={t}",
             match="is not a style classifier"),
    _metrics("lm-missing", REFS, PREDS, "--style=romantic", "--lm={t}/missing.json", match="missing.json"),
    _metrics("lm-random-bytes", REFS, PREDS, "--style=romantic", "--lm={t}/random.bin", match="random.bin"),
    _metrics("lm-is-refs", REFS, PREDS, "--style=romantic", "--lm={t}/refs.json", match="language model"),
    _metrics("lm-of-another-style", REFS, PREDS, "--style=humorous", "--lm={t}/lm.json", match="romantic"),
    _metrics("refs-nested-deep", raw_refs=DEEP_JSON, match="r.json is not the COCO format expected"),
    _metrics("preds-nested-deep", raw_preds=DEEP_JSON, match="p.json is not the COCO format expected"),
    case(METRICS, "lm-nested-deep", "{t}/refs.json", "{t}/preds.json", "--style=romantic", "--lm={t}/deep.json",
         files={"deep.json": DEEP_JSON}, match="deep.json is not a style language model"),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
