"""Boilerplate stripping, the first text filter: URLs, file names and stock phrases around the real alt-text.

"Young woman on the beach - stock photo" -> "Young woman on the beach"; "Embedded image permalink" -> "".
"""

from __future__ import annotations

import re

# Phrases that only ever frame an alt-text: stripped at either end even when only a space separates them.
FRAME_PHRASES = (
    r"click (?:here |the image |the picture |on (?:the )?(?:image|picture|photo) )?to (?:enlarge|zoom|view|see)"
    r"(?: (?:the )?(?:full[- ]size |larger |bigger )?(?:picture|image|photo|version|gallery))?",
    r"click (?:for|to see) (?:a )?(?:larger|full[- ]size|bigger) (?:image|picture|photo|version)",
    r"(?:view|see) (?:larger|full[- ]size|bigger) (?:image|picture|photo|version)",
    r"(?:royalty[- ]free )?stock (?:photo(?:graph|graphy)?|image|picture|footage|vector|illustration)s?",
    r"royalty[- ]free(?: (?:photo|image|picture|vector|illustration)s?)?",
    r"embedded image permalink",
    r"(?:[\w.\-]+(?: [\w.\-]+)?'s )?profile (?:photo|picture|image|pic)",
    r"image may contain",
    r"(?:(?:free|hd|4k|high resolution|high quality) )+(?:download|wallpapers?)",
    r"all rights reserved|getty images|shutterstock|alamy|istock(?:photo)?|dreamstime|123rf|depositphotos",
    r"(?:copyright|©|\(c\))(?: \d{4})?(?: [\w.\- ]{0,40})?",
)
# Words that frame an alt-text only when punctuation sets them apart ("Photo: ...", "... | Image").
FRAME_WORDS = (
    r"(?:photo|image|picture|pic)(?:graph)?(?: (?:credit|courtesy|source))?",
    r"(?:photo|image|picture|pic)(?:graph)?(?: taken)? by (?-i:[A-Z][\w.\-]*(?: [A-Z][\w.\-]*){0,3})",
    r"credit|download|wallpaper|thumbnail|img|untitled|default|featured image|view more|see more",
)
_PUNCT = r"[\-–—|:;,.•·*~/\\>]"
_SEP = rf"(?:\s*{_PUNCT}+\s*)+"
_SPACE_OR_SEP = rf"(?:{_SEP}|\s+)"
_PHRASES = "|".join(f"(?:{p})" for p in FRAME_PHRASES)
_WORDS = "|".join(f"(?:{p})" for p in FRAME_WORDS)
_PREFIX = re.compile(rf"^\s*(?:(?:{_PHRASES})(?:{_SPACE_OR_SEP}|$)|(?:{_WORDS})(?:{_SEP}|\s*$))", re.IGNORECASE)
_SUFFIX = re.compile(rf"(?:(?:^|{_SPACE_OR_SEP})(?:{_PHRASES})|(?:^|{_SEP})(?:{_WORDS})){_PUNCT}*\s*$", re.IGNORECASE)
_URL = r"(?:https?://|www\.)\S+|\b[\w\-]+(?:\.[\w\-]+)*\.(?:com|net|org|co\.uk|io|info|biz)(?:/\S*)?\b"
_FILE = r"\b[\w\-.]{1,80}\.(?:jpe?g|png|gif|webp|bmp|tiff?|svg|heic|avif)\b"
_CAMERA = r"\b(?:IMG|DSC[NF]?|DCIM|PXL|SAM|MVIMG|GOPR|DJI|P)[_\-]?\d{3,}[\w\-]*\b"
_CREDIT = r"[\(\[]\s*(?:photo|image|picture|credit|source|courtesy|copyright|via|©)[^\)\]]{0,80}[\)\]]|[\(\[]\s*[\)\]]"
_ANYWHERE = re.compile(rf"{_URL}|{_FILE}|{_CAMERA}|{_CREDIT}", re.IGNORECASE)
# Something each of those needs; most captions have none and skip the expensive search.
_ANYWHERE_TRIGGERS = re.compile(
    r"://|www\.|\.(?:com|net|org|co\.uk|io|info|biz|jpe?g|png|gif|webp|bmp|tiff?|svg|heic|avif)\b|\d{3}|[\(\[]",
    re.IGNORECASE,
)
# Words one of which every framing phrase contains: texts without any skip the end-anchored regexes.
_TRIGGERS = re.compile(
    r"photo|image|picture|pic|click|stock|royalty|permalink|profile|credit|download|wallpaper|thumbnail|img|"
    r"untitled|default|view|see more|copyright|©|\(c\)|rights|getty|shutterstock|alamy|istock|dreamstime|123rf|"
    r"depositphotos|hd|high",
    re.IGNORECASE,
)
_TRAILING_HASHTAGS = re.compile(r"(?:\s*#\w+)+\s*$")  # "... at the lake #nature #sunset": tags, not caption
_EDGES = re.compile(rf"^(?:\s|{_PUNCT})+|(?:\s|[\-–—|:;,•·*~/\\<])+$")


def strip_boilerplate(text: str) -> str:
  """Removes URLs, file names, credits and framing phrases at either end; what is left may be empty."""
  if "#" in text:
    text = _TRAILING_HASHTAGS.sub("", text)
  if _ANYWHERE_TRIGGERS.search(text):
    text = _ANYWHERE.sub(" ", text)
  framed = _TRIGGERS.search(text) is not None
  previous = None
  while text != previous:
    previous = text
    if framed:
      text = _SUFFIX.sub("", _PREFIX.sub("", text))
    text = _EDGES.sub("", text)
  return " ".join(text.split())
