"""The page of `GET /`: one self-contained HTML file (no script or style from elsewhere: the server may be offline)
where a person drops or picks an image, sees it, and sees its captions from `POST /caption`."""

HTML = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>capjax captioner</title>
<style>
  body { font: 16px/1.4 system-ui, sans-serif; max-width: 720px; margin: 2em auto; padding: 0 1em; color: #222; }
  #drop { border: 2px dashed #888; border-radius: 8px; padding: 2em; text-align: center; cursor: pointer; }
  #drop.over { border-color: #06c; background: #eef5ff; }
  #preview { max-width: 100%; max-height: 320px; display: none; margin: 1em auto; }
  ol { padding-left: 1.5em; } li { margin: .3em 0; } .score { color: #777; font-size: 85%; margin-left: .5em; }
  #status.error { color: #b00; }
</style>
</head>
<body>
<h1>capjax captioner</h1>
<label id="drop" for="file">Drop an image here, or click to pick one
  <input id="file" type="file" accept="image/*" hidden>
</label>
<img id="preview" alt="the image being captioned">
<p id="status" role="status"></p>
<ol id="captions"></ol>
<script>
"use strict";
const drop = document.getElementById("drop"), input = document.getElementById("file");
const preview = document.getElementById("preview"), status = document.getElementById("status");
const list = document.getElementById("captions");

async function caption(file) {
  list.replaceChildren();
  status.className = "";
  status.textContent = "Captioning " + file.name + "\u2026";
  preview.src = URL.createObjectURL(file);
  preview.style.display = "block";
  const form = new FormData();
  form.append("image", file, file.name);
  try {
    const answer = await fetch("/caption", {method: "POST", body: form});
    const body = await answer.json();
    if (!answer.ok) throw new Error(body.error || answer.statusText);
    for (const c of body.captions) {
      const item = document.createElement("li"), text = document.createElement("span");
      const score = document.createElement("span");
      text.className = "text";
      text.textContent = c.text || "(an empty caption)";
      item.append(text);
      score.className = "score";
      score.textContent = "score " + c.score.toFixed(3);
      item.append(score);
      list.append(item);
    }
    status.textContent = file.name;
  } catch (error) {
    status.className = "error";
    status.textContent = "No caption: " + error.message;
  }
}

input.addEventListener("change", () => { if (input.files.length) caption(input.files[0]); });
drop.addEventListener("dragover", (e) => { e.preventDefault(); drop.classList.add("over"); });
drop.addEventListener("dragleave", () => drop.classList.remove("over"));
drop.addEventListener("drop", (e) => {
  e.preventDefault();
  drop.classList.remove("over");
  if (e.dataTransfer.files.length) caption(e.dataTransfer.files[0]);
});
</script>
</body>
</html>
"""
