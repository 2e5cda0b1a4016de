"""`python -m capjax.tools.extract_features` against bad input (tests/hostile/harness.py runs the cases)."""

from __future__ import annotations

from hostile.harness import FIFO, NULL_DEVICE, case, not_flags, runner, symlink
from hostile.inputs import png

EXTRACT = "capjax.tools.extract_features"

IMAGES = "--images={t}/images/*.png"
NPZ = "--output={t}/result.npz"
NO_NPZ = ("result.npz", "result.partial.npz")


def _extract(name: str, *args: str, match: str = "", **kw):
  return case(EXTRACT, name, *args, absent=NO_NPZ, match=match, **kw)


CASES = [
    _extract("no-weights", IMAGES, NPZ, match="--weights"),
    _extract("weights-missing", "--weights={t}/nothing", IMAGES, NPZ, match="convert_weights"),
    _extract("weights-is-a-file", "--weights={t}/alt.tsv", IMAGES, NPZ, match="alt.tsv"),
    _extract("weights-empty-folder", "--weights={t}/folder", IMAGES, NPZ, match="metadata.json"),
    _extract("weights-metadata-not-json", "--weights={a}/bad_metadata", IMAGES, NPZ, match="metadata.json"),
    _extract("weights-metadata-without-classes", "--weights={a}/no_classes", IMAGES, NPZ, match="num_classes"),
    _extract("weights-without-variables", "--weights={a}/metadata_only", IMAGES, NPZ, match="variables"),
    _extract("weights-of-another-model", "--weights={a}/other_model", IMAGES, NPZ, match="variables"),
    _extract("images-match-nothing", "--weights={a}/metadata_only", "--images={t}/none/*.jpg", NPZ,
             match="--images"),
    _extract("no-images-flag", "--weights={a}/metadata_only", NPZ, match="--images"),
    case(EXTRACT, "no-output", "--weights={a}/metadata_only", IMAGES, match="--output"),
    case(EXTRACT, "output-not-npz", "--weights={a}/metadata_only", IMAGES, "--output={t}/result.txt",
         match=".npz", absent=("result.txt",)),
    case(EXTRACT, "output-is-a-folder", "--weights={a}/metadata_only", IMAGES, "--output={t}/folder",
         match="folder"),
    _extract("output-folder-missing", "--weights={a}/metadata_only", IMAGES, "--output={t}/nothing/result.npz",
             match="does not exist"),
    _extract("output-folder-read-only", "--weights={a}/metadata_only", IMAGES, "--output={ro}/result.npz",
             match="--output"),
    _extract("output-folder-unwritable", "--weights={a}/metadata_only", IMAGES, "--output=/proc/capjax.npz",
             match="--output"),
    _extract("output-folder-chmod", "--weights={a}/metadata_only", IMAGES, "--output={t}/locked/result.npz",
             files={"locked/.keep": b""}, chmod={"locked": 0o500}, match="--output"),
    case(EXTRACT, "output-is-an-input", "--weights={a}/metadata_only", "--images={t}/*.npz",
         "--output={t}/features.npz", match="features.npz"),
    case(EXTRACT, "earlier-output-kept-on-error", "--weights={t}/nothing", IMAGES, "--output={t}/features.npz"),
    _extract("images-include-a-fifo", "--weights={a}/metadata_only", "--images={t}/pics/*", NPZ,
             files={"pics/a.png": png(), "pics/b.png": FIFO}, match="--images={t}/pics/b.png is a FIFO"),
    case(EXTRACT, "output-is-a-device", "--weights={a}/metadata_only", IMAGES, "--output={t}/null.npz",
         files={"null.npz": NULL_DEVICE}, match="is a character device"),
    case(EXTRACT, "output-links-to-an-image", "--weights={a}/metadata_only", IMAGES, "--output={t}/link.npz",
         files={"link.npz": symlink("images/a.png")}, match="would overwrite --images="),
    _extract("batch-size-zero", "--weights={a}/metadata_only", IMAGES, NPZ, "--batch_size=0", match="batch_size"),
    _extract("batch-size-negative", "--weights={a}/metadata_only", IMAGES, NPZ, "--batch_size=-4",
             match="batch_size"),
    _extract("image-size-zero", "--weights={a}/metadata_only", IMAGES, NPZ, "--image_size=0", match="image_size"),
    _extract("image-size-negative", "--weights={a}/metadata_only", IMAGES, NPZ, "--image_size=-299",
             match="image_size"),
    _extract("image-size-too-small", "--weights={a}/metadata_only", IMAGES, NPZ, "--image_size=74",
             match="image_size"),
    *not_flags(EXTRACT, "--weights={a}/metadata_only", IMAGES, NPZ),
]

test_bad_input_is_one_error_line_and_changes_nothing = runner(CASES)
