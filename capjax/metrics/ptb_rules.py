"""CoreNLP 3.4.1's PTBLexer rules re-stated as Python regular expressions: its Unicode classes and macros, each
rule with its trailing context, and the action it takes (keep, skip, push back, ...). `capjax.metrics.tokenizer`
scans text with them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from typing import NamedTuple

def _char_class(predicate: Callable[[str], bool]) -> str:
  """Body of a regex character class holding the BMP characters that satisfy `predicate`, as ranges."""
  ranges: list[tuple[int, int]] = []
  for code in range(0x10000):
    if 0xD800 <= code <= 0xDFFF or not predicate(chr(code)):
      continue
    if ranges and ranges[-1][1] == code - 1:
      ranges[-1] = (ranges[-1][0], code)
    else:
      ranges.append((code, code))
  return "".join(f"\\u{a:04x}" if a == b else f"\\u{a:04x}-\\u{b:04x}" for a, b in ranges)


# Letters and digits of Python's Unicode that the Unicode tables of CoreNLP 3.4.1's scanner do not have yet (found
# by running every BMP character through the jar): there they match no rule and are dropped.
_UNKNOWN_TO_CORENLP = (
    "\\u037f\\u0528-\\u052f\\u0560\\u0588\\u05ef\\u0860-\\u086a\\u0870-\\u0887\\u0889-\\u088e\\u08a1"
    "\\u08ad-\\u08c9\\u0978\\u0980\\u09fc\\u0af9\\u0c34\\u0c5a\\u0c5d\\u0c80\\u0cdd\\u0d04\\u0d54-\\u0d56"
    "\\u0d5f\\u0de6-\\u0def\\u0e86\\u0e89\\u0e8c\\u0e8e-\\u0e93\\u0e98\\u0ea0\\u0ea8-\\u0ea9\\u0eac\\u13f5"
    "\\u13f8-\\u13fd\\u16f1-\\u16f8\\u170d\\u171f\\u1878\\u191d-\\u191e\\u19b0-\\u19c0\\u19c8-\\u19c9\\u1b4c"
    "\\u1c80-\\u1c88\\u1c90-\\u1cba\\u1cbd-\\u1cbf\\u1cf2-\\u1cf3\\u1cfa\\u2c2f\\u2c5f\\u312e-\\u312f"
    "\\u31bb-\\u31bf\\u4db6-\\u4dbf\\u9fcd-\\u9fff\\ua698-\\ua69d\\ua78f\\ua794-\\ua79f\\ua7ab-\\ua7ca"
    "\\ua7d0-\\ua7d1\\ua7d3\\ua7d5-\\ua7d9\\ua7f2-\\ua7f7\\ua8fd-\\ua8fe\\ua9e0-\\ua9e4\\ua9e6-\\ua9fe"
    "\\uaa7e-\\uaa7f\\uab30-\\uab5a\\uab5c-\\uab69\\uab70-\\uabbf")
_UNKNOWN_RE = re.compile(f"[{_UNKNOWN_TO_CORENLP}]")
# Letters there but not in Python's Unicode (Mongolian, re-categorized since).
_EXTRA_LETTERS = "\\u1885\\u1886"
# Cherokee capitals were plain letters (Lo) in CoreNLP's Unicode.
_NOT_UPPER_RE = re.compile("[\\u13a0-\\u13f5]")


@functools.cache
def _unicode_classes() -> dict[str, str]:
  """JFlex's [:letter:], [:digit:] and [:uppercase:] (Java's Character.isLetter/isDigit/isUpperCase), as classes.

  Python's \\d is [:digit:] (category Nd) and [^\\W\\d_] (alphanumerics, not decimal digits or _) is [:letter:] plus
  some numeric characters; the scanner subtracts `excluded` with a lookahead, which keeps the patterns small.
  """
  return {
      "excluded": _char_class(lambda c: (c.isalnum() and not c.isalpha() and not c.isdecimal())
                              or _UNKNOWN_RE.match(c) is not None),
      "unknown": _UNKNOWN_TO_CORENLP,
      "upper": _char_class(lambda c: c.isupper() and not _UNKNOWN_RE.match(c) and not _NOT_UPPER_RE.match(c)),
  }


def _ci(words: str) -> str:
  """A caseless literal alternation (JFlex %caseless), longest alternative first so Python finds the longest."""
  alternatives = sorted(words.split("|"), key=len, reverse=True)
  return "(?i:" + "|".join(alternatives) + ")"


def _macros() -> dict[str, str]:
  """The 3.4.1 PTBLexer macros, in Python syntax. Character classes are case-sensitive, literals caseless."""
  u = _unicode_classes()
  m: dict[str, str] = {}
  m["LETTERCHAR"] = f"(?:(?![{u['excluded']}])[^\\W\\d_]|[{_EXTRA_LETTERS}])"
  m["DIGIT"] = f"(?![{u['unknown']}])\\d"
  m["UPPER"] = f"[{u['upper']}]"
  m["LD"] = f"(?:(?![{u['excluded']}])[^\\W_]|[{_EXTRA_LETTERS}])"
  m["SPACE"] = "[ \\t\\u00a0\\u2000-\\u200a\\u3000]"
  m["SPACES"] = "{SPACE}+"
  m["NEWLINE"] = "(?:\\r\\n|[\\r\\n\\u2028\\u2029\\x0b\\x0c\\x85])"
  m["SPACENL"] = "(?:{SPACE}|{NEWLINE})"
  m["SPACENLS"] = "{SPACENL}+"
  name = "[A-Za-z][A-Za-z0-9_:.\\-]*"
  # attribute values stay on their line: CoreNLP lets them run over a line end, but here a line is a caption
  m["SGML"] = (
      "<(?:[!?][A-Za-z\\-][^>\\r\\n]*"
      f"|{name}(?:[ ]+(?:{name}[ ]*=[ ]*(?:'[^'\\r\\n]*'|\"[^\"\\r\\n]*\")|{name}))*[ ]*/?"
      f"|/{name})[ ]*>")
  m["SENTEND"] = "{SPACENL}(?:{SPACENL}|{UPPER}|{SGML})"
  m["SPLET"] = "&[aeiouAEIOU]" + _ci("acute|grave|uml") + ";"
  m["LETTER"] = ("(?:{LETTERCHAR}|[\\u00ad\\u0237-\\u024f\\u02c2-\\u02c5\\u02d2-\\u02df\\u02e5-\\u02ff"
                 "\\u0300-\\u036f\\u0370-\\u037d\\u0384\\u0385\\u03cf\\u03f6\\u03fc-\\u03ff\\u0483-\\u0487"
                 "\\u04cf\\u04f6-\\u04ff\\u0510-\\u0525\\u055a-\\u055f\\u0591-\\u05bd\\u05bf\\u05c1\\u05c2"
                 "\\u05c4\\u05c5\\u05c7\\u0615-\\u061a\\u063b-\\u063f\\u064b-\\u065e\\u0670\\u06d6-\\u06ef"
                 "\\u06fa-\\u06ff\\u070f\\u0711\\u0730-\\u074f\\u0750-\\u077f\\u07a6-\\u07b1\\u07ca-\\u07f5"
                 "\\u07fa\\u0900-\\u0903\\u093c\\u093e-\\u094e\\u0951-\\u0955\\u0962-\\u0963\\u0981-\\u0983"
                 "\\u09bc-\\u09c4\\u09c7\\u09c8\\u09cb-\\u09cd\\u09d7\\u09e2\\u09e3\\u0a01-\\u0a03\\u0a3c"
                 "\\u0a3e-\\u0a4f\\u0a81-\\u0a83\\u0abc-\\u0acf\\u0b82\\u0bbe-\\u0bc2\\u0bc6-\\u0bc8"
                 "\\u0bca-\\u0bcd\\u0c01-\\u0c03\\u0c3e-\\u0c56\\u0d3e-\\u0d44\\u0d46-\\u0d48\\u0e30-\\u0e3a"
                 "\\u0e47-\\u0e4e\\u0eb1-\\u0ebc\\u0ec8-\\u0ecd]|{SPLET})")
  m["WORD"] = "{LETTER}(?:{LETTER}|{DIGIT})*(?:[.!?]{LETTER}(?:{LETTER}|{DIGIT})*)*"
  m["APOS"] = "(?:['\\u0092\\u2019]|" + _ci("&apos;") + ")"
  m["APOSETC"] = "(?:{APOS}|[`\\u0091\\u2018\\u201b])"
  m["REDAUX"] = "{APOS}(?:[msdMSD]|" + _ci("re|ve|ll") + ")"
  m["SWORD"] = "[A-Za-z\\u00ad]*[A-MO-Za-mo-z]\\u00ad*"
  m["SREDAUX"] = "(?i:n){APOSETC}(?i:t)"
  m["HYPHEN"] = "[\\-_\\u058a\\u2010\\u2011]"
  m["THING"] = ("(?:[dDoOlL]{APOSETC}{LD})?{LD}+"
                "(?:{HYPHEN}(?:[dDoOlL]{APOSETC}{LD})?{LD}+)*")
  m["SPAMP"] = _ci("&amp;")
  m["THINGA"] = "[A-Z]+(?:(?:[+&]|{SPAMP})[A-Z]+)+"
  m["THING3"] = "[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}(?:\\\\?/[A-Za-z0-9]+(?:-[A-Za-z]+){0,2}){1,2}"
  m["ACRO"] = ("(?:" + _ci("canada|sino|korean|eu|japan|non") + "-(?i:u\\.s)"
               "|(?i:u\\.s\\.-)(?:(?i:u\\.s\\.s\\.r)|(?i:u\\.k))|[A-Za-z](?:\\.[A-Za-z])*)")
  m["ACRO2"] = m["ACRO"].replace("(?:\\.[A-Za-z])*)", "(?:\\.[A-Za-z])+)")
  m["HTHING"] = "[A-Za-z0-9][A-Za-z0-9.,\\u00ad]*(?:-(?:{ACRO2}\\.|[A-Za-z0-9\\u00ad]+))+"
  m["NUM"] = "(?:{DIGIT}+(?:[.:,\\u00ad\\u066b\\u066c]{DIGIT}+)*|(?:[.:,\\u00ad\\u066b\\u066c]{DIGIT}+)+)"
  m["INSENTP"] = "[,;:\\u3001]"
  return m


def _expand(pattern: str, macros: Mapping[str, str]) -> str:
  """Substitutes {NAME} macro references (recursively); leaves regex counts such as {1,4} alone."""
  def one(match: re.Match[str]) -> str:
    return "(?:" + _expand(macros[match.group(1)], macros) + ")"
  return re.sub(r"\{([A-Z][A-Z0-9_]*)\}", one, pattern)


def _quotes(token: str, probably_left: bool) -> str:
  """PTBLexer.latexQuotes: ASCII quotes by guessed side, then the curly ones by their own side."""
  token = re.sub("&apos;|'", "`" if probably_left else "'", token)  # case-sensitive, unlike the rules
  token = re.sub("\"|&quot;", "``" if probably_left else "''", token)
  token = re.sub("[\u0091\u2018\u201b\u2039]", "`", token)
  token = re.sub("[\u0092\u2019\u203a]", "'", token)
  token = re.sub("[\u0093\u201c\u00ab]", "``", token)
  return re.sub("[\u0094\u201d\u00bb]", "''", token)


def _parens(token: str) -> str:
  return token.replace("(", "-LRB-").replace(")", "-RRB-")


def _no_soft_hyphens(token: str) -> str:
  return token.replace("\u00ad", "") or "-"  # a lone soft hyphen stays a hyphen


def _amp(token: str) -> str:
  return re.sub("(?i:&amp;)", "&", token)


def _currency(token: str) -> str:
  return re.sub("[\u0080\u00a4\u20a0\u20ac]", "$", token.replace("\u00a2", "cents").replace("\u00a3", "#"))


def _fractions(token: str) -> str:
  for char, text in (("\u00bc", "1/4"), ("\u00bd", "1/2"), ("\u00be", "3/4"), ("\u2153", "1/3"),
                     ("\u2154", "2/3")):
    token = token.replace(char, text)
  return token


def _nbsp(token: str) -> str:
  return token.replace(" ", "\u00a0")


def strip_space_end(token: str) -> str:
  """JFlex-bug workaround in 3.4.1: white space at the end of a trailing-context token goes back to the input."""
  return token.rstrip(" \t\n\x0b\x0c\r\x85")


# Actions: what a matched rule emits. KEEP emits the text (maybe transformed); SKIP emits nothing; PUSHBACK
# emits the text minus its last n characters and rescans them; NEWLINE ends the line; ACRONYM and ABBREV emit
# the word with its period and scan the period again.
KEEP, SKIP, NEWLINE, PUSHBACK, ACRONYM, ABBREV = range(6)


class Rule(NamedTuple):
  name: str
  pattern: str  # the matched text
  context: str | None  # JFlex trailing context: must follow, counts for the match length, is not consumed
  kind: int = KEEP
  transform: Callable[[str], str] | None = None
  pushback: int = 0
  # Set where Python's first-found match can be shorter than the longest (JFlex's) one: the scanner then tries
  # longer ends, up to where `extent` stops matching.
  extent: str | None = None


@functools.cache
def rules() -> tuple[Rule, ...]:
  """PTBLexer 3.4.1's rules in priority order (earlier wins a tie in length)."""
  r = Rule
  left_quote = functools.partial(_quotes, probably_left=True)
  right_quote = functools.partial(_quotes, probably_left=False)
  abmonth = "Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec"
  abdays = "Mon|Tue|Tues|Wed|Thu|Thurs|Fri"
  abstate_ci = ("Ala|Ariz|Calif|Colo|Conn|Ct|Dak|Fla|Ga|Ind|Kans|Kan|Ky|Md|Mich|Minn|Mo|Mont|Neb|Nev|Okla|Penn|"
                "Tenn|Va|Vt|Wisc|Wis|Wyo")
  abstate_cs = ("A(?i:rk)|A(?i:z)|D(?i:el)|I(?i:ll)|L(?i:a)|M(?i:ass)|M(?i:iss)|O(?i:re)|P(?i:a)|T(?i:ex)"
                "|W(?i:ash)")
  abcomp = "Inc|Cos|Co|Corp|Ltd|Plc|Rt|Bancorp|Bhd|Assn|Univ|Intl|Sys|Bldg"
  abnum = "tel|est|ext|sq"
  abptit = "Jr|Sr|Bros|Ed\\.D|Ph\\.D|Blvd|Rd|Esq"
  abbrev1 = ("(?:" + _ci("|".join([abmonth, abdays, abstate_ci, abcomp, abnum, abptit, "etc|al|seq"]))
             + "|" + abstate_cs + "|(?i:pp?t)[ye](?i:s)?)\\.")
  abtitle_ci = ("Mr|Mrs|Ms|Drs|Dr|Profs|Prof|Sens|Sen|Reps|Rep|Attys|Atty|Lt|Col|Gen|Messrs|Govs|Gov|Adm|Rev|Maj|"
                "Sgt|Cpl|Pvt|Capt|Ste|St|Ave|Pres|Lieut|Hon|Brig|Comdr|Cmdr|Pfc|Spc|Supts|Supt|Det|Mt|Ft|Adj|Adv|"
                "Asst|Assoc|Ens|Insp|Mlle|Mme|Msgr|Sfc|Ph")
  abbrev4 = ("(?:{ACRO}|" + _ci(abtitle_ci + "|vs|Alex|Wm|Jos|Cie|a\\.k\\.a|cf|TREAS|Invt|Elec|Natl|Dept")
             + "|M(?i:iss)|(?i:m)[ft](?i:g)|[A-Za-z])")
  acro_next = ("A(?i:bout)|A(?i:ccording)|A(?i:dditionally)|A(?i:fter)|A(?i:n)|A|A(?i:s)|A(?i:t)|B(?i:ut)|"
               "E(?i:arlier)|H(?i:e)|H(?i:er)|H(?i:ere)|H(?i:owever)|I(?i:f)|I(?i:n)|I(?i:t)|L(?i:ast)|M(?i:any)|"
               "M(?i:ore)|M(?i:r)\\.|M(?i:s)\\.|N(?i:ow)|O(?i:nce)|O(?i:ne)|O(?i:ther)|O(?i:ur)|S(?i:he)|"
               "S(?i:ince)|S(?i:o)|S(?i:ome)|S(?i:uch)|T(?i:hat)|T(?i:he)|T(?i:heir)|T(?i:hen)|T(?i:here)|"
               "T(?i:hese)|T(?i:hey)|T(?i:his)|W(?i:e)|W(?i:hen)|W(?i:hile)|W(?i:hat)|Y(?i:et)|Y(?i:ou)")
  acro_next = "|".join(sorted(acro_next.split("|"), key=len, reverse=True))
  url_end = "[^ \\t\\n\\f\\r\"<>|.!?(){},\\-]"
  apoword = ("{APOS}(?i:n){APOS}?", "[lLdDjJ]{APOS}", "(?i:dunkin){APOS}", "(?i:somethin){APOS}", "(?i:ol){APOS}",
             "{APOS}(?i:em)", "[A-HJ-XZn]{APOSETC}{LETTERCHAR}{2}{LETTERCHAR}*", "{APOS}[2-9]0(?i:s)",
             "{APOS}(?i:till?)", "{LETTERCHAR}{LETTERCHAR}*[aeiouyAEIOUY]{APOSETC}[aeiouA-Z]{LETTERCHAR}*",
             "{APOS}(?i:cause)", "(?i:cont'd)\\.?", "'(?i:twas)", "(?i:nor'easter)", "(?i:c'mon)", "(?i:e'er)",
             "(?i:s'mores)", "(?i:ev'ry)", "(?i:li'l)", "(?i:nat'l)", "(?i:o){APOSETC}(?i:o)")
  return (
      r("PROGRAMMING_LANGUAGE", "(?i:c\\+\\+|[cf]#)", None),
      r("ASSIMILATION3", _ci("cannot") + "|'(?i:twas)", None, PUSHBACK, pushback=3),
      r("ASSIMILATION2", "'(?i:tis)|" + _ci("gonna|gotta|lemme|gimme|wanna"), None, PUSHBACK, pushback=2),
      r("SGML", "{SGML}", None, KEEP, _nbsp, extent="[^\\n]{0,200}"),
      r("SPMDASH", "&" + _ci("MD|mdash|ndash") + ";|[\\u0096\\u0097\\u2013\\u2014\\u2015]", None, KEEP,
        lambda _: "--"),
      r("SPAMP", "{SPAMP}", None, KEEP, _amp),
      r("SPPUNC", "&(?:" + _ci("HT|TL|UR|LR|QC|QL|QR|odq|cdq") + "|#[0-9]+);", None),
      r("WORD_REDAUX", "{WORD}", "{REDAUX}", KEEP, _no_soft_hyphens),
      r("SWORD_SREDAUX", "{SWORD}", "{SREDAUX}", KEEP, _no_soft_hyphens),
      r("WORD", "{WORD}", None, KEEP, _no_soft_hyphens),
      *(r("APOWORD", alternative, None) for alternative in apoword),
      r("APOWORD2", "(?i:y){APOS}", "{LETTERCHAR}"),
      r("FULLURL", "(?i:https?)://[^ \\t\\n\\f\\r\"<>|(){}]+" + url_end, None),
      r("LIKELYURL", "(?:(?i:www)\\.(?:[^ \\t\\n\\f\\r\"<>|.!?(){},]+\\.)+[a-zA-Z]{2,4}"
        "|(?:[^ \\t\\n\\f\\r\"`'<>|.!?(){},-_$]+\\.)+" + _ci("com|net|org|edu") + ")"
        "(?:/[^ \\t\\n\\f\\r\"<>|()]+" + url_end + ")?", None, extent="[^ \\t\\n\\f\\r]*"),
      r("EMAIL", "(?:(?i:&lt;)|<)?[a-zA-Z0-9][^ \\t\\n\\f\\r\"<>|(){}\\u00a0]*@"
        "(?:[^ \\t\\n\\f\\r\"<>|(){}.\\u00a0]+\\.)*[^ \\t\\n\\f\\r\"<>|(){}.\\u00a0]+(?:(?i:&gt;)|>)?", None,
        extent="<?[^ \\t\\n\\f\\r\"<>|(){}\\u00a0]*>?"),
      r("TWITTER", "@[a-zA-Z_][a-zA-Z_0-9]*|#{LETTER}+", None),
      r("REDAUX_CONTEXT", "{REDAUX}", "[^A-Za-z]", KEEP, right_quote),
      r("SREDAUX_CONTEXT", "{SREDAUX}", "[^A-Za-z]", KEEP, right_quote),
      r("DATE", "{DIGIT}{1,2}[\\-/]{DIGIT}{1,2}[\\-/]{DIGIT}{2,4}", None),
      r("NUMBER", "[\\-+]?{NUM}", None, KEEP, _no_soft_hyphens),
      r("SUBSUPNUM", "[\\u207a\\u207b\\u208a\\u208b]?(?:[\\u2070\\u00b9\\u00b2\\u00b3\\u2074-\\u2079]+"
        "|[\\u2080-\\u2089]+)", None),
      r("FRAC", "(?:{DIGIT}{1,4}[\\- \\u00a0])?{DIGIT}{1,4}(?:\\\\?/|\\u2044){DIGIT}{1,4}", None, KEEP, _nbsp),
      r("FRAC2", "[\\u00bc\\u00bd\\u00be\\u2153-\\u215e]", None, KEEP, _fractions),
      r("TBSPEC", "-" + _ci("RRB|LRB|RCB|LCB|RSB|LSB") + "-|(?i:C\\.D\\.s|pro-|anti-)"
        "|(?i:S)(?:&|{SPAMP})(?i:P-500|Ls)|(?i:Cap){APOS}(?i:n)|(?i:c){APOS}(?i:est)", None, KEEP, _amp),
      r("THING3", "{THING3}", None),
      r("DOLSIGN", "[A-Z]*\\$|#", None),
      r("DOLSIGN2", "[\\u00a2\\u00a3\\u00a4\\u00a5\\u0080\\u20a0\\u20ac\\u060b\\u0e3f\\u20a4\\uffe0\\uffe1"
        "\\uffe5\\uffe6]", None, KEEP, _currency),
      r("ACRONYM_END", "{ACRO}\\.", "{SPACENLS}(?:" + acro_next + "|{SGML}){SPACENL}", ACRONYM),
      r("ABBREV3", _ci("ca|figs|fig|prop|nos|no|art|bldg|pp|op") + "\\.", "{SPACENL}?{DIGIT}", KEEP,
        strip_space_end),
      r("PTY_LTD", "(?:(?i:pt)[eyEY]|(?i:co))\\.", "{SPACE}" + _ci("ltd|lim"), KEEP),
      r("ABBREV1_SENTEND", abbrev1, "{SENTEND}", ABBREV),
      r("ABBREV1_CONTINUES", abbrev1, "(?s:..)", KEEP),
      r("ABBREV1", abbrev1, None, ABBREV),
      r("ABBREV2", abbrev4 + "\\.", None),
      r("ABBREV4_SPACE", abbrev4, "{SPACE}"),
      r("ACRO_SPACENL", "{ACRO}", "{SPACENL}"),
      r("TBSPEC2", "{APOS}[0-9][0-9]", "{SPACENL}"),
      r("FILENAME", "(?:{LETTER}|{DIGIT})+(?:\\.(?:{LETTER}|{DIGIT})+)*\\." + _ci(
          "bat|bmp|c|class|cgi|cpp|dll|doc|docx|exe|gif|gz|h|htm|html|jar|java|jpeg|jpg|mov|mp3|pdf|php|pl|png|"
          "ppt|ps|py|sql|tar|txt|wav|x|xml|zip"), "{SPACENL}|[.?!,]"),
      r("WORD_PERIOD", "{WORD}\\.", "{INSENTP}", KEEP, _no_soft_hyphens),
      r("PHONE", "(?:\\([0-9]{2,3}\\)[ \\u00a0]?|(?:\\+\\+?)?(?:[0-9]{2,4}[\\- \\u00a0])?[0-9]{2,4}[\\- \\u00a0])"
        "[0-9]{3,4}[\\- \\u00a0]?[0-9]{3,5}"
        "|(?:(?:\\+\\+?)?[0-9]{2,4}\\.)?[0-9]{2,4}\\.[0-9]{3,4}\\.[0-9]{3,5}", None, KEEP,
        lambda t: _parens(_nbsp(t)), extent="[0-9()+\\- \\u00a0.]*"),
      r("DBLQUOTE_LEFT", "\"|(?i:&quot;)", "[A-Za-z0-9$]", KEEP, left_quote),
      r("DBLQUOTE", "\"|(?i:&quot;)", None, KEEP, right_quote),
      r("LESSTHAN", "<|(?i:&lt;)", None, KEEP, lambda _: "<"),
      r("GREATERTHAN", ">|(?i:&gt;)", None, KEEP, lambda _: ">"),
      r("SMILEY", "[<>]?[:;=][\\-o*']?[()DPdpO\\\\{@|\\[\\]]", "[^A-Za-z0-9]", KEEP, _parens),
      r("ASIANSMILEY", "[\\^x=~<>]\\.\\[\\^(?i:x)=~<>\\]|[\\-\\^x=~<>']_[\\-\\^x=~<>']"
        "|\\([\\-\\^x=~<>'][_.]?[\\-\\^x=~<>']\\)", None, KEEP, _parens),
      r("LCB", "\\{", None, KEEP, lambda _: "-LCB-"),
      r("RCB", "\\}", None, KEEP, lambda _: "-RCB-"),
      r("LSB", "\\[", None, KEEP, lambda _: "-LSB-"),
      r("RSB", "\\]", None, KEEP, lambda _: "-RSB-"),
      r("LRB", "\\(", None, KEEP, lambda _: "-LRB-"),
      r("RRB", "\\)", None, KEEP, lambda _: "-RRB-"),
      r("HYPHENS", "-+", None, KEEP, lambda t: "--" if 3 <= len(t) <= 4 else t),
      r("LDOTS", "\\.{3,5}|(?:\\.[ \\u00a0]){2,4}\\.|[\\u0085\\u2026]", None, KEEP, lambda _: "..."),
      r("FNMARKS", "@+|#+|_+", None),
      r("ASTS", "\\*+|(?:\\\\\\*){1,3}", None),
      r("INSENTP", "{INSENTP}", None),
      r("QMARKS", "[?!]+", None),
      r("PERIOD", "[.\\u00a1\\u00bf\\u037e\\u0589\\u061f\\u06d4\\u0700-\\u0702\\u07fa\\u3002]", None),
      r("EQUALS", "=", None),
      r("SLASH", "/", None),
      r("HTHING_PERIOD", "{HTHING}\\.", "{INSENTP}", KEEP, _no_soft_hyphens),
      r("HTHING", "{HTHING}", None, KEEP, _no_soft_hyphens, extent="[A-Za-z0-9.,\\u00ad\\-]*"),
      r("THING_PERIOD", "{THING}\\.", "{INSENTP}"),
      r("THING", "{THING}", None),
      r("THINGA_PERIOD", "{THINGA}\\.", "{INSENTP}", KEEP, _amp),
      r("THINGA", "{THINGA}", None, KEEP, _amp),
      r("QUOTE_LEFT", "'", "[A-Za-z][^ \\t\\n\\r\\u00a0]", KEEP, left_quote),
      r("REDAUX", "{REDAUX}", None, KEEP, right_quote),
      r("SREDAUX", "{SREDAUX}", None, KEEP, right_quote),
      r("QUOTES", "(?i:&apos;)|''|[`\\u2018\\u2019\\u201a\\u201b\\u201c\\u201d\\u0091\\u0092\\u0093\\u0094\\u201e"
        "\\u201f\\u2039\\u203a\\u00ab\\u00bb]{1,2}|['\\u0092\\u2019]", None, KEEP, right_quote),
      r("FAKEDUCKFEET", "<<|>>", None),
      r("MISCSYMBOL", "[+%&~\\^|\\\\\\u00a6\\u00a7\\u00a8\\u00a9\\u00ac\\u00ae\\u00af\\u00b0-\\u00ba\\u00d7"
        "\\u00f7\\u0387\\u05be\\u05c0\\u05c3\\u05c6\\u05f3\\u05f4\\u0600-\\u0603\\u0606-\\u060a\\u060c\\u0614"
        "\\u061b\\u061e\\u066a\\u066d\\u0703-\\u070d\\u07f6\\u07f7\\u07f8\\u0964\\u0965\\u0e4f\\u1fbd\\u2016"
        "\\u2017\\u2020-\\u2023\\u2030-\\u2038\\u203b\\u203e-\\u2042\\u2044\\u207a-\\u207f\\u208a-\\u208e"
        "\\u2100-\\u214f\\u2190-\\u21ff\\u2200-\\u2bff\\u3012\\u30fb\\uff01-\\uff0f\\uff1a-\\uff20"
        "\\uff3b-\\uff40\\uff5b-\\uff65]", None),
      r("SPACES", "\\x00|{SPACES}|[\\u200b\\u200e\\u200f\\ufeff]", None, SKIP),
      r("NEWLINE", "{NEWLINE}", None, NEWLINE),
      r("NBSP_ENTITY", "(?i:&nbsp;)", None, SKIP),
  )


@functools.cache
def expanded() -> tuple[tuple[str, str | None], ...]:
  """Per rule of `rules()`, its pattern and trailing context (None: none) with every macro substituted."""
  macros = _macros()
  return tuple((_expand(rule.pattern, macros), None if rule.context is None else _expand(rule.context, macros))
               for rule in rules())
