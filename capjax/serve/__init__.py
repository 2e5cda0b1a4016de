"""`python -m capjax.serve`: an export (or a trained workdir, exported in memory) captioning images over HTTP, with
the standard library's server: `batcher` (concurrent requests decoded together by one worker), `endpoints` (the
endpoints and their error answers), `page` (the HTML page of `GET /`)."""
