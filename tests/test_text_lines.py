"""Reading lines as bytes: every line ending, the byte-order mark, reads cut anywhere, nothing decoded."""

import pytest

from capjax.text.lines import read_lines, split_lines, undecodable

CASES = [
    (b"", []),
    (b"a", [b"a"]),
    (b"a\n", [b"a"]),
    (b"a\nb", [b"a", b"b"]),
    (b"a\r\nb\r\n", [b"a", b"b"]),
    (b"a\rb\r", [b"a", b"b"]),  # old Mac: a lone CR ends a line, it does not glue rows together
    (b"a\r\r\nb\n\nc", [b"a", b"", b"b", b"", b"c"]),
    (b"\n\n", [b"", b""]),
    (b"\xef\xbb\xbfid\tx\r\n", [b"id\tx"]),
    (b"\xef\xbb\xbf", []),
    (b"\xef\xbb", [b"\xef\xbb"]),  # half a byte-order mark is data
    (b"x\xef\xbb\xbf\n", [b"x\xef\xbb\xbf"]),  # only a leading one is dropped
    (b"caf\xe9\x85\xe2\x80\xa8\x0b\x0c|", [b"caf\xe9\x85\xe2\x80\xa8\x0b\x0c|"]),  # NEL, U+2028, VT, FF: not line ends
]


@pytest.mark.parametrize("chunk_size", [1, 2, 3, 1 << 20])
@pytest.mark.parametrize("data,lines", CASES)
def test_any_line_ending_any_read_size(tmp_path, data, lines, chunk_size):
  path = tmp_path / "f.tsv"
  path.write_bytes(data)
  assert list(read_lines(path, chunk_size)) == lines


def test_undecodable_names_the_first_bad_byte():
  line = "Café".encode("latin-1")
  with pytest.raises(UnicodeDecodeError) as error:
    line.decode("utf-8")
  assert undecodable(line, error.value) == "byte 4 (0xe9)"


@pytest.mark.parametrize("data,lines", CASES[:9] + CASES[12:])
def test_decoded_text_splits_at_the_same_line_endings_and_no_others(data, lines):
  text = data.removeprefix(b"\xef\xbb\xbf").decode("latin-1")  # one character per byte: the same positions
  assert split_lines(text) == [line.decode("latin-1") for line in lines]


def test_form_feed_and_the_unicode_separators_stay_inside_a_line():
  text = "a dog\x0cin love\u2028at dawn\x85,\x1c\u2029 far\x0b away\nline two\n"
  assert split_lines(text) == ["a dog\x0cin love\u2028at dawn\x85,\x1c\u2029 far\x0b away", "line two"]
  assert len(text.splitlines()) == 8  # what str.splitlines made of it
