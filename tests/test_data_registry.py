"""capjax.data.registry: the builders capjax knows, and how to build each, read from the builder's README.md."""

from __future__ import annotations

from capjax.data import registry


def test_build_commands_are_the_readme_lines_without_comments_or_continuations():
  readme = ("# x\n\n```\npython -m capjax.data.build --dataset=x --manual_dir=DIR --data_dir=OUT \\\n"
            "    --set=a=1\npython -m capjax.data.build --dataset=x/b --manual_dir=DIR   # or x/c\n"
            "  python -m capjax.data.build --dataset=x/b --manual_dir=DIR\n```\nrun `python -m capjax.data.build`.\n")
  assert registry._build_commands(readme) == ["python -m capjax.data.build --dataset=x --manual_dir=DIR --data_dir=OUT",
                                              "python -m capjax.data.build --dataset=x/b --manual_dir=DIR"]


def test_every_builder_says_how_to_build_it_from_its_readme():
  assert set(registry.KNOWN_BUILDERS) == set(registry.BUILDER_NAMES)
  assert all(module == f"tfds_builders.{name}" for name, (module, _) in registry.KNOWN_BUILDERS.items())
  assert registry.KNOWN_BUILDERS["synthetic_scenes"][1] == (
      "nothing to download: it is built automatically on first use, or by "
      "`python -m capjax.data.build --dataset=synthetic_scenes --data_dir=DATA_DIR [--config=tiny]`")
  assert registry.KNOWN_BUILDERS["cc3m"][1] == (
      "download what tfds_builders/cc3m/README.md lists into DIR, then run "
      "`python -m capjax.data.build --dataset=cc3m --manual_dir=DIR --data_dir=DATA` (or cc3m/wds)")
  assert registry.KNOWN_BUILDERS["karpathy"][1].endswith(
      "(or karpathy/coco, karpathy/flickr8k, karpathy/coco_format, karpathy/nocaps)")
  for name in registry.BUILDER_NAMES:  # each README has a build command: none falls back to the bare one
    assert "README.md" in registry.KNOWN_BUILDERS[name][1] or "nothing to download" in registry.KNOWN_BUILDERS[name][1]
  assert registry.how_to_build("no_such_builder") == (
      "`python -m capjax.data.build --dataset=no_such_builder --data_dir=DATA_DIR`")
